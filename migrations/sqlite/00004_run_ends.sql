-- SQLite edition of postgres/00004_run_ends.sql: how the last run of each
-- (type, week, version) ended, for "digest status". Times are microseconds
-- since the epoch, as elsewhere in this schema.

-- +goose Up
CREATE TABLE run_ends (
    digest_type TEXT    NOT NULL,
    iso_week    TEXT    NOT NULL,
    version     TEXT    NOT NULL,
    run_id      TEXT    NOT NULL,
    mode        TEXT    NOT NULL,
    shard       TEXT    NOT NULL,
    exit_code   INTEGER NOT NULL,
    started_at  INTEGER NOT NULL,
    ended_at    INTEGER NOT NULL,
    PRIMARY KEY (iso_week, digest_type, version)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE run_ends;
