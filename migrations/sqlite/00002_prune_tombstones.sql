-- SQLite edition of postgres/00002_prune_tombstones.sql. Times are INTEGER
-- microseconds since the Unix epoch (UTC). SQLite serialises writers, so
-- prune and a run's start need no lock of their own.

-- +goose Up
CREATE TABLE prune_tombstones (
    digest_type     TEXT    NOT NULL,
    iso_week        TEXT    NOT NULL,
    version         TEXT    NOT NULL,
    receipts_pruned INTEGER NOT NULL,
    first_pruned_at INTEGER NOT NULL,
    last_pruned_at  INTEGER NOT NULL,
    PRIMARY KEY (iso_week, digest_type, version)
) WITHOUT ROWID;

CREATE TABLE week_runs (
    digest_type     TEXT    NOT NULL,
    iso_week        TEXT    NOT NULL,
    version         TEXT    NOT NULL,
    last_started_at INTEGER NOT NULL,
    PRIMARY KEY (iso_week, digest_type, version)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE week_runs;
DROP TABLE prune_tombstones;
