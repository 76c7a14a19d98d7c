-- Snapshot pins (see postgres.go, pinned.go).

-- name: PinSnapshot
-- Stores what pin ($1 type, $2 week, $3 version) fixes if the pin is new:
-- as_of $4, created at $5, zone $6, key id $7, partial $8 (an early
-- cutoff, --early-cutoff). DO UPDATE rather than DO
-- NOTHING: it returns the row whichever run inserted it (waiting for a
-- concurrent first run to commit), and it lets a pin made before zones and
-- key ids were pinned (NULL) adopt this run's, once. as_of never changes.
INSERT INTO snapshot_pins AS p (digest_type, iso_week, version, as_of, created_at, zone, key_id, partial, resend_detail)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, nullif($9, ''))
ON CONFLICT (digest_type, iso_week, version) DO UPDATE SET
    zone = coalesce(p.zone, excluded.zone),
    key_id = coalesce(p.key_id, excluded.key_id),
    -- A deliberate resend under a new version (run --resend-as-new-version,
    -- $9): recorded once, by the first run that made it.
    resend_detail = coalesce(p.resend_detail, excluded.resend_detail)
RETURNING as_of, zone, key_id, partial, repinned_from, coalesce(resend_detail, '');

-- name: CountByKeyID
-- Week $1's receipts by key id, from the counters the receipts' triggers
-- keep (migration 00016): a few rows whatever the size of the week.
-- Receipts store the week, not the type or version: see digest.WeekPin.
SELECT key_id, sum(n)::bigint FROM week_state_counts WHERE iso_week = $1
GROUP BY key_id HAVING sum(n) <> 0;

-- name: Pinned
-- What the first run of pin ($1 type, $2 week, $3 version) fixed.
SELECT as_of, zone, key_id, partial, repinned_from, coalesce(resend_detail, '') FROM snapshot_pins
WHERE digest_type = $1 AND iso_week = $2 AND version = $3;

-- name: WeekPins
-- The pins (type, version) of week $1 (receipts made before 00019 do not say
-- which a key is of).
SELECT digest_type, version FROM snapshot_pins WHERE iso_week = $1;

-- name: Repin
-- Moves the cutoff of pin ($1 type, $2 week, $3 version) forward to $4,
-- made whole (not partial), at $5, detail $6: "digest repin". Only
-- forward, or a partial pin to where it stands: a cutoff never moves back
-- over activity a run already read. No row: not pinned, or not early.
UPDATE snapshot_pins SET repinned_from = as_of, as_of = $4, partial = false, repinned_at = $5, repin_detail = $6
WHERE digest_type = $1 AND iso_week = $2 AND version = $3 AND (as_of < $4 OR (partial AND as_of <= $4))
RETURNING repinned_from;

-- name: ObservedKeys
-- Those of the keys $2 that observe runs saw in week $1 (observe mode and
-- a cohort's observed rest), for status: a probe of observations_key_at
-- per key.
SELECT DISTINCT key FROM observations WHERE key = ANY($2::text[]) AND iso_week = $1;

-- name: CurrentSchema
SELECT current_schema();

-- name: SetGenericPlans
-- Switches the plan cache to generic plans for the single-key statements
-- of one batch; see sendBatchMode.
SET plan_cache_mode = force_generic_plan;

-- name: ResetPlans
RESET plan_cache_mode;

-- name: SentByVersion
-- Week $1's receipts of type $2 (or of no recorded type: made before
-- migration 00019) that were sent or are in flight (claimed, retryable or
-- held: a run of that version may send them yet), by content version
-- ('' for none recorded): what a run of another version would send a
-- second time. Reads the week's partition; a run asks only when the week
-- holds a pin of the type under another version.
SELECT coalesce(content_version, ''), count(*) FROM receipts
WHERE iso_week = $1 AND (digest_type = $2 OR digest_type IS NULL)
  AND (sent_at IS NOT NULL OR maybe_sent OR state IN ('held', 'claimed', 'retryable'))
GROUP BY 1;
