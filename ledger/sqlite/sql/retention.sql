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

-- name: PruneProviderEvents
-- Deletes the provider events received before ?1 (ledger.EventRetention)
-- but those that are evidence: an event naming the key of a receipt this
-- prune keeps (one not prunable by the receipts' cutoff ?2 and states ?3;
-- after the receipts' deletion in the same transaction, any receipt
-- left), and each provider's newest event, its watermark. A dry run runs
-- it in a savepoint it rolls back.
DELETE FROM provider_events AS e
WHERE e.received_at < ?1
    AND NOT EXISTS (
        SELECT 1 FROM receipts r WHERE r.key = e.key
            AND NOT (r.updated_at < ?2 AND r.state IN (SELECT value FROM json_each(?3))
                AND r.iso_week NOT IN (SELECT iso_week FROM week_runs WHERE last_started_at >= ?2)))
    AND e.counted_at < (SELECT max(n.counted_at) FROM provider_events n WHERE n.provider = e.provider);

-- name: PruneSoftBounces
-- Deletes the soft-bounce counts whose last bounce is before ?1, of weeks
-- before ?2: the first week a soft bounce still to come may count in its
-- streak (ledger.EventCutoffs.StreakWeek). YYYY-Www strings sort as the
-- weeks do (SQLite compares text bytewise).
DELETE FROM soft_bounces WHERE last_at < ?1 AND iso_week < ?2;

-- name: OldestRows
-- The oldest row of each kept table (ledger.OldestRow), each by an index.
SELECT (SELECT min(iso_week) FROM receipts), (SELECT min(at) FROM observations),
    (SELECT min(received_at) FROM provider_events), (SELECT min(last_at) FROM soft_bounces);
