-- What each run's read of the source found, per pin and shard: the
-- digests the pinned snapshot yields and the customers it suppressed or
-- skipped, so that "digest status" compares them with the ledger's counts
-- instead of reading the whole week (cmd/digest/weekstate.go). Counts and
-- key ids only: no customer data. The observations index lets status ask
-- whether a week has observations without reading the table.

-- +goose Up
CREATE TABLE week_expectations (
    digest_type   text        NOT NULL,
    iso_week      text        NOT NULL,
    version       text        NOT NULL,
    shard         text        NOT NULL, -- "all" or "I/N"
    as_of         timestamptz NOT NULL, -- the pin's as_of the read used
    zone          text        NOT NULL,
    key_id        text        NOT NULL, -- the pin's key id
    send_empty    boolean     NOT NULL,
    send          bigint      NOT NULL, -- digests the read would send
    suppressed    bigint      NOT NULL,
    empty         bigint      NOT NULL,
    not_built     bigint      NOT NULL,
    ghosts        text        NOT NULL, -- JSON: receipts of the shard's other customers by state
    other_key_ids bigint      NOT NULL, -- receipts of the week under another key id
    run_id        text        NOT NULL,
    recorded_at   timestamptz NOT NULL,
    PRIMARY KEY (iso_week, digest_type, version, shard)
);
CREATE INDEX observations_week ON observations (iso_week);

-- +goose Down
DROP INDEX observations_week;
DROP TABLE week_expectations;
