-- Run ends (see runs.go): how the last run of a pin ended, for status.

-- name: RecordRunEnd
-- Pin (?1 type, ?2 week, ?3 version): run ?4, mode ?5, shard ?6, exit code
-- ?7, started ?8, ended ?9. The last run to end wins.
INSERT INTO run_ends (digest_type, iso_week, version, run_id, mode, shard, exit_code, started_at, ended_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
ON CONFLICT (iso_week, digest_type, version) DO UPDATE SET
    run_id = excluded.run_id, mode = excluded.mode, shard = excluded.shard,
    exit_code = excluded.exit_code, started_at = excluded.started_at, ended_at = excluded.ended_at;

-- name: LastRun
SELECT run_id, mode, shard, exit_code, started_at, ended_at FROM run_ends
WHERE digest_type = ?1 AND iso_week = ?2 AND version = ?3;
