-- Snapshot pins (see sqlite.go, pinned.go).

-- name: PinSnapshot
-- Stores what pin (?1 type, ?2 week, ?3 version) fixes if the pin is new:
-- as_of ?4, created at ?5, zone ?6, key id ?7, partial ?8. A pin made before zones and
-- key ids were pinned (NULL) adopts this run's, once; as_of never changes.
INSERT INTO snapshot_pins AS p (digest_type, iso_week, version, as_of, created_at, zone, key_id, partial, resend_detail)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, nullif(?9, ''))
ON CONFLICT (digest_type, iso_week, version) DO UPDATE SET
    zone = coalesce(p.zone, excluded.zone),
    key_id = coalesce(p.key_id, excluded.key_id),
    -- A deliberate resend under a new version (run --resend-as-new-version,
    -- ?9): recorded once, by the first run that made it.
    resend_detail = coalesce(p.resend_detail, excluded.resend_detail)
RETURNING as_of, zone, key_id, partial, repinned_from, coalesce(resend_detail, '');

-- name: CountByKeyID
-- Week ?1's receipts by key id. Receipts store the week, not the type or
-- version: see digest.WeekPin.
SELECT key_id, count(*) FROM receipts WHERE iso_week = ?1 GROUP BY key_id;

-- name: Pinned
-- What the first run of pin (?1 type, ?2 week, ?3 version) fixed.
SELECT as_of, zone, key_id, partial, repinned_from, coalesce(resend_detail, '') FROM snapshot_pins
WHERE digest_type = ?1 AND iso_week = ?2 AND version = ?3;

-- name: WeekPins
-- The pins (type, version) of week ?1 (receipts made before 00012 do not say
-- which a key is of).
SELECT digest_type, version FROM snapshot_pins WHERE iso_week = ?1;

-- name: Repin
-- See the PostgreSQL edition: forward only, or a partial pin made whole.
UPDATE snapshot_pins SET repinned_from = as_of, as_of = ?4, partial = 0, repinned_at = ?5, repin_detail = ?6
WHERE digest_type = ?1 AND iso_week = ?2 AND version = ?3 AND (as_of < ?4 OR (partial AND as_of <= ?4))
RETURNING repinned_from;

-- name: ObservedKeys
-- Those of the keys ?2 (a JSON array) that observe runs saw in week ?1.
SELECT DISTINCT key FROM observations WHERE key IN (SELECT value FROM json_each(?2)) AND iso_week = ?1;

-- name: SentByVersion
-- See the PostgreSQL edition.
SELECT coalesce(content_version, ''), count(*) FROM receipts
WHERE iso_week = ?1 AND (digest_type = ?2 OR digest_type IS NULL)
  AND (sent_at IS NOT NULL OR maybe_sent OR state IN ('held', 'claimed', 'retryable'))
GROUP BY 1;
