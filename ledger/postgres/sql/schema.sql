-- Schema version and live claims (see schema.go).

-- name: HasVersionTable
SELECT to_regclass('goose_db_version') IS NOT NULL;

-- name: SchemaVersion
-- The highest migration applied (goose deletes a row it rolls back).
SELECT coalesce(max(version_id), 0) FROM goose_db_version;

-- name: LiveClaims
-- Receipts claimed under a lease that has not expired by either clock: the
-- store's ($1) or the server's. Leases are set by the clock of the run
-- that claimed (or the server's); a migrate Job on a machine whose clock
-- runs ahead must not think a running run's leases expired.
SELECT count(*) FROM receipts WHERE state = 'claimed' AND lease_expires_at > least($1::timestamptz, now());
