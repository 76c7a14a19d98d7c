-- Retention (see retention.go). A receipt is prunable when it was last
-- updated before the cutoff ?1, its state is one of ?2 (a JSON array), and
-- no run of its week started at or after the cutoff.

-- name: PrunableByWeek
SELECT iso_week, count(*) FROM receipts
WHERE updated_at < ?1 AND state IN (SELECT value FROM json_each(?2))
    AND iso_week NOT IN (SELECT iso_week FROM week_runs WHERE last_started_at >= ?1)
GROUP BY iso_week ORDER BY iso_week;

-- name: PruneEvents
DELETE FROM receipt_events WHERE key IN (
    SELECT key FROM receipts
    WHERE updated_at < ?1 AND state IN (SELECT value FROM json_each(?2))
        AND iso_week NOT IN (SELECT iso_week FROM week_runs WHERE last_started_at >= ?1));

-- name: PruneReceipts
DELETE FROM receipts
WHERE updated_at < ?1 AND state IN (SELECT value FROM json_each(?2))
    AND iso_week NOT IN (SELECT iso_week FROM week_runs WHERE last_started_at >= ?1);

-- name: Tombstone
-- Leaves (or adds to) the tombstone of week ?1 for each of its pins: ?2
-- receipts pruned at ?3. "WHERE true" lets SQLite parse ON CONFLICT after
-- a SELECT.
INSERT INTO prune_tombstones (digest_type, iso_week, version, receipts_pruned, first_pruned_at, last_pruned_at)
SELECT coalesce(p.digest_type, ''), w.iso_week, coalesce(p.version, ''), ?2, ?3, ?3
FROM (SELECT ?1 AS iso_week) w LEFT JOIN snapshot_pins p ON p.iso_week = w.iso_week WHERE true
ON CONFLICT (iso_week, digest_type, version) DO UPDATE
SET receipts_pruned = receipts_pruned + excluded.receipts_pruned, last_pruned_at = excluded.last_pruned_at;

-- name: PruneObservations
DELETE FROM observations WHERE at < ?1;

-- name: StartWeek
-- Records a run of pin (?1 type, ?2 week, ?3 version) starting at ?4.
INSERT INTO week_runs (digest_type, iso_week, version, last_started_at)
VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (iso_week, digest_type, version) DO UPDATE
SET last_started_at = max(last_started_at, excluded.last_started_at);

-- name: WeekTombstone
-- The tombstone of week ?1 for type ?2 and version ?3, else the one left
-- for a week with no pin.
SELECT digest_type, iso_week, version, receipts_pruned, first_pruned_at, last_pruned_at
FROM prune_tombstones
WHERE iso_week = ?1 AND ((digest_type = ?2 AND version = ?3) OR (digest_type = '' AND version = ''))
ORDER BY digest_type DESC LIMIT 1;

-- name: Tombstones
-- The tombstones of week ?1 ('' all), newest week first.
SELECT digest_type, iso_week, version, receipts_pruned, first_pruned_at, last_pruned_at
FROM prune_tombstones
WHERE ?1 = '' OR iso_week = ?1 ORDER BY iso_week DESC, digest_type, version;

-- name: StaleClaims
-- The receipts a prune ends before deleting (ledger.EndStaleClaims):
-- claimed with the lease expired by the clock ?2 (NULL: SQLite's), or
-- retryable, last updated before the cutoff ?1, of a week no run started
-- since; after the key ?3, in key order, at most ?4.
SELECT key, iso_week FROM receipts
WHERE updated_at < ?1
    AND ((state = 'claimed' AND lease_expires_at <= coalesce(?2, CAST(unixepoch('subsec') * 1000000 AS INTEGER))) OR state = 'retryable')
    AND iso_week NOT IN (SELECT iso_week FROM week_runs WHERE last_started_at >= ?1)
    AND key > ?3
ORDER BY key LIMIT ?4;
