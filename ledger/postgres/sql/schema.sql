-- Schema version and live claims (see schema.go).

-- name: HasVersionTable
SELECT to_regclass('goose_db_version') IS NOT NULL;

-- name: SchemaVersion
-- The highest migration applied (goose deletes a row it rolls back).
SELECT coalesce(max(version_id), 0) FROM goose_db_version;

-- name: LiveClaims
-- Receipts claimed under a lease that has not expired at $1 (the store's
-- clock, the one leases are set by).
SELECT count(*) FROM receipts WHERE state = 'claimed' AND lease_expires_at > $1;
