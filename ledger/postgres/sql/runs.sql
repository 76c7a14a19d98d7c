-- Run ends (see runs.go): how the last run of a pin ended, for status.

-- name: RecordRunEnd
-- Pin ($1 type, $2 week, $3 version): run $4, mode $5, shard $6, exit code
-- $7, started $8, ended $9. The last run to end wins.
INSERT INTO run_ends (digest_type, iso_week, version, run_id, mode, shard, exit_code, started_at, ended_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (iso_week, digest_type, version) DO UPDATE SET
    run_id = excluded.run_id, mode = excluded.mode, shard = excluded.shard,
    exit_code = excluded.exit_code, started_at = excluded.started_at, ended_at = excluded.ended_at;

-- name: LastRun
SELECT run_id, mode, shard, exit_code, started_at, ended_at FROM run_ends
WHERE digest_type = $1 AND iso_week = $2 AND version = $3;

-- name: RecordExpectation
-- Pin ($1 type, $2 week, $3 version), shard $4: what a run's read found
-- (see ledger.Expectation), with the week's receipts under another key id
-- than the pin's counted now, from the counters the receipts' triggers
-- keep (migration 00016). The last read of a shard wins.
INSERT INTO week_expectations (digest_type, iso_week, version, shard, as_of, zone, key_id, send_empty,
    send, suppressed, empty, not_built, ghosts, other_key_ids, run_id, recorded_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
    (SELECT coalesce(sum(n), 0) FROM week_state_counts WHERE iso_week = $2 AND key_id <> $7), $14, $15)
ON CONFLICT (iso_week, digest_type, version, shard) DO UPDATE SET
    as_of = excluded.as_of, zone = excluded.zone, key_id = excluded.key_id, send_empty = excluded.send_empty,
    send = excluded.send, suppressed = excluded.suppressed, empty = excluded.empty, not_built = excluded.not_built,
    ghosts = excluded.ghosts, other_key_ids = excluded.other_key_ids, run_id = excluded.run_id,
    recorded_at = excluded.recorded_at;

-- name: Expectations
-- Pin ($1 type, $2 week, $3 version): its expectations by shard.
SELECT shard, as_of, zone, key_id, send_empty, send, suppressed, empty, not_built, ghosts, other_key_ids,
    run_id, recorded_at
FROM week_expectations WHERE digest_type = $1 AND iso_week = $2 AND version = $3
ORDER BY shard;

-- name: ExpectationsOthers
-- Week $2: how many other (type, version) pairs than ($1, $3) a run pinned
-- or ran, and whether it has observations (through observations_week).
SELECT (SELECT count(*) FROM (
            SELECT digest_type, version FROM snapshot_pins WHERE iso_week = $2
            UNION
            SELECT digest_type, version FROM run_ends WHERE iso_week = $2) p
        WHERE (p.digest_type, p.version) <> ($1, $3)),
       EXISTS (SELECT 1 FROM observations WHERE iso_week = $2);
