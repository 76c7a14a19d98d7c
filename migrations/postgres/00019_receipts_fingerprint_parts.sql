-- The checks of a receipt's fingerprint parts (digest.Keyring's
-- FingerprintParts: keyed, eight hex digits each of the address, the name
-- and the rest), so that a quarantine's history says which part changed.
-- NULL for a receipt claimed before, or released from quarantine (the
-- adopted fingerprint's parts are not kept).

-- +goose Up
-- IF NOT EXISTS: the migration tests that run today's claim on an older
-- schema add the column it writes first (ledger/postgres partsColumn).
ALTER TABLE receipts ADD COLUMN IF NOT EXISTS fingerprint_parts text;

-- +goose Down
ALTER TABLE receipts DROP COLUMN fingerprint_parts;
