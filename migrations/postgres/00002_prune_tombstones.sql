-- Retention that never destroys live evidence (issue 11): what prune left
-- behind, and when each week was last run, so that prune and a run of the
-- same week cannot cross.

-- +goose Up
-- One row per (type, week, version) whose receipts "digest prune" deleted,
-- some or all. A run of that week refuses unless told to resend: the
-- deleted receipts were the only record that those digests went out.
-- Receipts carry no type or version (their key is an HMAC), so a prune of
-- a week's receipts writes a tombstone for every snapshot pin of that week;
-- a week with no pin gets one with type and version '' that stands for all.
-- Tombstones are never pruned.
CREATE TABLE prune_tombstones (
    digest_type     text        NOT NULL,
    iso_week        text        NOT NULL,
    version         text        NOT NULL,
    receipts_pruned bigint      NOT NULL, -- over every prune of the week
    first_pruned_at timestamptz NOT NULL,
    last_pruned_at  timestamptz NOT NULL,
    PRIMARY KEY (iso_week, digest_type, version)
);

-- When a run of (type, week, version) last started. Prune keeps every
-- receipt of a week run since its cutoff, and takes a SHARE lock on this
-- table while it deletes: a run records its start (a row lock that waits
-- for the prune) before it reads the tombstones, so either the prune sees
-- the run and keeps the week, or the run sees the tombstone and refuses.
CREATE TABLE week_runs (
    digest_type     text        NOT NULL,
    iso_week        text        NOT NULL,
    version         text        NOT NULL,
    last_started_at timestamptz NOT NULL,
    PRIMARY KEY (iso_week, digest_type, version)
);

-- +goose Down
DROP TABLE week_runs;
DROP TABLE prune_tombstones;
