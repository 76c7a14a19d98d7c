-- How the last run of each (type, week, version) ended, for "digest
-- status" (issue 13): when, in which mode and shard, and its exit code.
-- One row per pin, overwritten by each run's end (every shard's, every
-- mode's): the week's completeness comes from the receipts, this only says
-- what the last run reported. No customer data: the run id is a random
-- transport identity.

-- +goose Up
CREATE TABLE run_ends (
    digest_type text        NOT NULL,
    iso_week    text        NOT NULL,
    version     text        NOT NULL,
    run_id      text        NOT NULL,
    mode        text        NOT NULL,
    shard       text        NOT NULL, -- "I/N", '' for the whole week
    exit_code   integer     NOT NULL,
    started_at  timestamptz NOT NULL,
    ended_at    timestamptz NOT NULL,
    PRIMARY KEY (iso_week, digest_type, version)
);

-- +goose Down
DROP TABLE run_ends;
