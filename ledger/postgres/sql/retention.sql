-- Retention (see retention.go). A receipt is prunable when it was last
-- updated before the cutoff $1, its state is one of $2, and no run of its
-- week started at or after the cutoff.

-- name: PrunableByWeek
-- A dry run: the prunable receipts counted by week.
SELECT iso_week, count(*) FROM receipts
WHERE updated_at < $1 AND state = ANY($2)
    AND iso_week NOT IN (SELECT iso_week FROM week_runs WHERE last_started_at >= $1)
GROUP BY iso_week ORDER BY iso_week;

-- name: LockWeekRuns
LOCK TABLE week_runs IN SHARE MODE;

-- name: Prune
-- Deletes the prunable receipts and their events and leaves a tombstone
-- (at $3) for every pin of each week it took receipts from. Data-modifying
-- CTEs see one snapshot: the tombstones count exactly the receipts this
-- statement deleted. Returns the receipts deleted by week.
WITH gone AS (
    DELETE FROM receipts
    WHERE updated_at < $1 AND state = ANY($2)
        AND iso_week NOT IN (SELECT iso_week FROM week_runs WHERE last_started_at >= $1)
    RETURNING key, iso_week
),
events AS (DELETE FROM receipt_events e USING gone WHERE e.key = gone.key),
weeks AS (SELECT iso_week, count(*) AS n FROM gone GROUP BY iso_week),
stones AS (
    INSERT INTO prune_tombstones (digest_type, iso_week, version, receipts_pruned, first_pruned_at, last_pruned_at)
    SELECT coalesce(p.digest_type, ''), w.iso_week, coalesce(p.version, ''), w.n, $3, $3
    FROM weeks w LEFT JOIN snapshot_pins p ON p.iso_week = w.iso_week
    ON CONFLICT (iso_week, digest_type, version) DO UPDATE
    SET receipts_pruned = prune_tombstones.receipts_pruned + excluded.receipts_pruned,
        last_pruned_at = excluded.last_pruned_at
)
SELECT iso_week, n FROM weeks ORDER BY iso_week;

-- name: PruneObservations
DELETE FROM observations WHERE at < $1;

-- name: StartWeek
-- Records a run of pin ($1 type, $2 week, $3 version) starting at $4.
INSERT INTO week_runs (digest_type, iso_week, version, last_started_at)
VALUES ($1, $2, $3, $4)
ON CONFLICT (iso_week, digest_type, version) DO UPDATE
SET last_started_at = greatest(week_runs.last_started_at, excluded.last_started_at);

-- name: WeekTombstone
-- The tombstone of week $1 for type $2 and version $3, else the one left
-- for a week with no pin.
SELECT digest_type, iso_week, version, receipts_pruned, first_pruned_at, last_pruned_at
FROM prune_tombstones
WHERE iso_week = $1 AND ((digest_type = $2 AND version = $3) OR (digest_type = '' AND version = ''))
ORDER BY digest_type DESC LIMIT 1;

-- name: Tombstones
-- The tombstones of week $1 ('' all), newest week first.
SELECT digest_type, iso_week, version, receipts_pruned, first_pruned_at, last_pruned_at
FROM prune_tombstones
WHERE $1 = '' OR iso_week = $1 ORDER BY iso_week DESC, digest_type, version;

-- name: DroppablePartitions
-- The week partitions of receipts (not the DEFAULT one) that hold receipts
-- and nothing but prunable ones, of no week run since the cutoff: a prune
-- can drop them whole. Read without locking receipts; dropPartitions reads
-- each again under the lock (PartitionWeeks).
WITH recent AS (SELECT DISTINCT iso_week FROM week_runs WHERE last_started_at >= $1)
SELECT c.relname FROM receipts r
JOIN pg_class c ON c.oid = r.tableoid
LEFT JOIN recent w ON w.iso_week = r.iso_week
WHERE r.tableoid <> 'receipts_default'::regclass
GROUP BY c.relname
HAVING bool_and(r.updated_at < $1 AND r.state = ANY($2) AND w.iso_week IS NULL)
ORDER BY 1;

-- name: LockReceipts
-- Dropping a partition takes this lock anyway; taken first, it keeps the
-- partitions to drop from changing between their check and their drop.
LOCK TABLE receipts IN ACCESS EXCLUSIVE MODE;

-- name: TombstoneWeeks
-- Leaves a tombstone (at $3) for every pin of each week $1 whose $2
-- receipts went with their partition: the same rows as Prune's.
INSERT INTO prune_tombstones (digest_type, iso_week, version, receipts_pruned, first_pruned_at, last_pruned_at)
SELECT coalesce(p.digest_type, ''), w.iso_week, coalesce(p.version, ''), w.n, $3, $3
FROM unnest($1::text[], $2::bigint[]) AS w(iso_week, n) LEFT JOIN snapshot_pins p ON p.iso_week = w.iso_week
ON CONFLICT (iso_week, digest_type, version) DO UPDATE
SET receipts_pruned = prune_tombstones.receipts_pruned + excluded.receipts_pruned,
    last_pruned_at = excluded.last_pruned_at;

-- name: StaleClaims
-- The receipts a prune ends before deleting (ledger.EndStaleClaims):
-- claimed with the lease expired by the clock $2 (NULL: now()), or
-- retryable, last updated before the cutoff $1, of a week no run started
-- since; after the key $3, in key order, at most $4.
SELECT key, iso_week FROM receipts
WHERE updated_at < $1
    AND ((state = 'claimed' AND lease_expires_at <= coalesce($2::timestamptz, now())) OR state = 'retryable')
    AND iso_week NOT IN (SELECT iso_week FROM week_runs WHERE last_started_at >= $1)
    AND key > $3
ORDER BY key LIMIT $4;

-- name: PruneProviderEvents
-- Deletes (unless $4, a dry run, which only counts) the provider events
-- received before $1 (ledger.EventRetention) but those that are evidence:
-- an event naming the key of a receipt this prune keeps (one not prunable
-- by the receipts' cutoff $2 and states $3; after the receipts' deletion
-- in the same transaction, any receipt left), and each provider's newest
-- event, its watermark. Returns how many went (or would go).
WITH doomed AS (
    SELECT e.provider, e.event_id FROM provider_events e
    WHERE e.received_at < $1
        AND NOT EXISTS (
            SELECT 1 FROM receipts r WHERE r.key = e.key
                AND NOT (r.updated_at < $2 AND r.state = ANY($3)
                    AND r.iso_week NOT IN (SELECT iso_week FROM week_runs WHERE last_started_at >= $2)))
        AND e.counted_at < (SELECT max(n.counted_at) FROM provider_events n WHERE n.provider = e.provider)
),
gone AS (
    DELETE FROM provider_events p USING doomed d
    WHERE NOT $4 AND p.provider = d.provider AND p.event_id = d.event_id
)
SELECT count(*) FROM doomed;

-- name: PruneSoftBounces
-- Deletes (unless $3, a dry run, which only counts) the soft-bounce counts
-- whose last bounce is before $1, of weeks before $2: the first week a
-- soft bounce still to come may count in its streak
-- (ledger.EventCutoffs.StreakWeek). Week strings compare in C order:
-- YYYY-Www sorts as the weeks do. Returns how many went (or would go).
WITH doomed AS (
    SELECT address_key, iso_week FROM soft_bounces
    WHERE last_at < $1 AND iso_week COLLATE "C" < $2
),
gone AS (
    DELETE FROM soft_bounces s USING doomed d
    WHERE NOT $3 AND s.address_key = d.address_key AND s.iso_week = d.iso_week
)
SELECT count(*) FROM doomed;

-- name: OldestRows
-- The oldest row of each kept table (ledger.OldestRow), each by an index:
-- the oldest week with receipts from the per-week counters, the earliest
-- observation, provider event received and soft bounce.
SELECT
    (SELECT min(iso_week COLLATE "C") FROM (
        SELECT iso_week FROM week_state_counts GROUP BY iso_week HAVING sum(n) > 0) w),
    (SELECT min(at) FROM observations),
    (SELECT min(received_at) FROM provider_events),
    (SELECT min(last_at) FROM soft_bounces);
