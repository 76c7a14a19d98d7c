-- Schema version and live claims (see schema.go).

-- name: HasVersionTable
SELECT to_regclass('goose_db_version') IS NOT NULL;

-- name: SchemaVersion
-- The highest migration applied (goose deletes a row it rolls back).
SELECT coalesce(max(version_id), 0) FROM goose_db_version;

-- name: LiveClaims
-- Receipts claimed under a lease that has not expired by the server's
-- clock, the one leases are set by ($1 its stand-in in tests).
SELECT count(*) FROM receipts WHERE state = 'claimed' AND lease_expires_at > coalesce($1::timestamptz, now());
