-- SQLite edition of postgres/00011_week_expectations.sql: what each run's
-- read of the source found, per pin and shard, for "digest status". Times
-- are microseconds since the epoch, as elsewhere in this schema.

-- +goose Up
CREATE TABLE week_expectations (
    digest_type   TEXT    NOT NULL,
    iso_week      TEXT    NOT NULL,
    version       TEXT    NOT NULL,
    shard         TEXT    NOT NULL,
    as_of         INTEGER NOT NULL,
    zone          TEXT    NOT NULL,
    key_id        TEXT    NOT NULL,
    send_empty    INTEGER NOT NULL,
    send          INTEGER NOT NULL,
    suppressed    INTEGER NOT NULL,
    empty         INTEGER NOT NULL,
    not_built     INTEGER NOT NULL,
    ghosts        TEXT    NOT NULL,
    other_key_ids INTEGER NOT NULL,
    run_id        TEXT    NOT NULL,
    recorded_at   INTEGER NOT NULL,
    PRIMARY KEY (iso_week, digest_type, version, shard)
) WITHOUT ROWID;
CREATE INDEX observations_week ON observations (iso_week);

-- +goose Down
DROP INDEX observations_week;
DROP TABLE week_expectations;
