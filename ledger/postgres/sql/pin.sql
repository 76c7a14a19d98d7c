-- Snapshot pins (see postgres.go, pinned.go).

-- name: PinSnapshot
-- Stores what pin ($1 type, $2 week, $3 version) fixes if the pin is new:
-- as_of $4, created at $5, zone $6, key id $7. DO UPDATE rather than DO
-- NOTHING: it returns the row whichever run inserted it (waiting for a
-- concurrent first run to commit), and it lets a pin made before zones and
-- key ids were pinned (NULL) adopt this run's, once. as_of never changes.
INSERT INTO snapshot_pins AS p (digest_type, iso_week, version, as_of, created_at, zone, key_id)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (digest_type, iso_week, version) DO UPDATE SET
    zone = coalesce(p.zone, excluded.zone),
    key_id = coalesce(p.key_id, excluded.key_id)
RETURNING as_of, zone, key_id;

-- name: CountByKeyID
-- Week $1's receipts by key id. Receipts store the week, not the type or
-- version: see digest.WeekPin.
SELECT key_id, count(*) FROM receipts WHERE iso_week = $1 GROUP BY key_id;

-- name: Pinned
-- What the first run of pin ($1 type, $2 week, $3 version) fixed.
SELECT as_of, zone, key_id FROM snapshot_pins
WHERE digest_type = $1 AND iso_week = $2 AND version = $3;

-- name: CurrentSchema
SELECT current_schema();

-- name: SetGenericPlans
-- Switches the plan cache to generic plans for the single-key statements
-- of one batch; see sendBatchMode.
SET plan_cache_mode = force_generic_plan;

-- name: ResetPlans
RESET plan_cache_mode;
