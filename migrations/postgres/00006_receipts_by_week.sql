-- receipts partitioned by ISO week (issue 14): pruning a settled week
-- becomes dropping its partition (no WAL per row, nothing left to vacuum)
-- instead of a DELETE. One partition a week, named receipts_YYYY_wNN,
-- created ahead by "digest migrate" and by each run's start (see
-- ledger/postgres/partition.go); a DEFAULT partition takes the rows of a
-- week that has none, so a claim never fails for lack of a partition.
--
-- The primary key is (key, iso_week): a partitioned table's unique keys
-- must hold the partition key, and the key (an HMAC over customer, week,
-- type and version) already determines the week, so uniqueness is
-- unchanged. key comes first so that the operator statements that know
-- only the key (review show, release, mark sent) still probe each
-- partition's primary key; the hot path gives both columns.
--
-- receipt_events stays one table: the happy path writes no event, and a
-- dropped week's few events are deleted by key before its partition goes.
--
-- The data moves in this migration's transaction (the whole receipts
-- table is copied once): run it when no run is under way.

-- +goose Up
ALTER TABLE receipts RENAME TO receipts_unpartitioned;
ALTER INDEX receipts_pkey RENAME TO receipts_unpartitioned_pkey;
ALTER INDEX receipts_week_state RENAME TO receipts_unpartitioned_week_state;
ALTER INDEX receipts_attention RENAME TO receipts_unpartitioned_attention;

-- The same columns in the same order, with their NOT NULLs, defaults and
-- the state CHECK (receipts_state_check).
CREATE TABLE receipts (
    LIKE receipts_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
    PRIMARY KEY (key, iso_week)
) PARTITION BY LIST (iso_week);
-- The attention index (see 00001) on every partition. (iso_week, state)
-- only on the DEFAULT partition, the one that holds several weeks: a week's
-- partition is the week, and there the index would only be a trap. The
-- fenced statements say iso_week = $week to reach one partition, and a
-- plan made while a new week's partition had no statistics read the whole
-- week through that index for each batch of 100 (measured: start and
-- finish three times as costly as before, TestCostPerDigest). Without it
-- a claim and a finish also write one index entry fewer.
CREATE INDEX receipts_attention ON receipts (state, key) WHERE state NOT IN ('claimed', 'sent');

-- fillfactor 70 (see 00005) is a property of each partition: a
-- partitioned table has no storage of its own.
CREATE TABLE receipts_default PARTITION OF receipts DEFAULT WITH (fillfactor = 70);
-- Counts and lists by week in the DEFAULT partition, and the check that it
-- holds no row of a week whose partition is about to be created.
CREATE INDEX receipts_default_week_state ON receipts_default (iso_week, state);

-- +goose StatementBegin
DO $$
DECLARE
    w text;
BEGIN
    FOR w IN SELECT DISTINCT iso_week FROM receipts_unpartitioned ORDER BY 1 LOOP
        -- The name rule of ledger/postgres weekPartition: receipts_2026_w48.
        EXECUTE format('CREATE TABLE %I PARTITION OF receipts FOR VALUES IN (%L) WITH (fillfactor = 70)',
            'receipts_' || lower(replace(w, '-', '_')), w);
    END LOOP;
END
$$;
-- +goose StatementEnd

INSERT INTO receipts (key, key_id, state, previous_state, fingerprint, conflict_fingerprint, attempts,
    claim_token, lease_expires_at, send_started, send_started_at, maybe_sent, next_attempt_at,
    first_claimed_at, last_attempt_at, sent_at, provider_ref, last_error, run_id, iso_week, updated_at,
    first_run_id)
SELECT key, key_id, state, previous_state, fingerprint, conflict_fingerprint, attempts,
    claim_token, lease_expires_at, send_started, send_started_at, maybe_sent, next_attempt_at,
    first_claimed_at, last_attempt_at, sent_at, provider_ref, last_error, run_id, iso_week, updated_at,
    first_run_id
FROM receipts_unpartitioned;

DROP TABLE receipts_unpartitioned;

-- +goose Down
ALTER TABLE receipts RENAME TO receipts_partitioned;
ALTER INDEX receipts_pkey RENAME TO receipts_partitioned_pkey;
ALTER INDEX receipts_attention RENAME TO receipts_partitioned_attention;

CREATE TABLE receipts (
    LIKE receipts_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
    PRIMARY KEY (key)
) WITH (fillfactor = 70);

INSERT INTO receipts SELECT key, key_id, state, previous_state, fingerprint, conflict_fingerprint, attempts,
    claim_token, lease_expires_at, send_started, send_started_at, maybe_sent, next_attempt_at,
    first_claimed_at, last_attempt_at, sent_at, provider_ref, last_error, run_id, iso_week, updated_at,
    first_run_id
FROM receipts_partitioned;

DROP TABLE receipts_partitioned; -- and every partition

CREATE INDEX receipts_week_state ON receipts (iso_week, state);
CREATE INDEX receipts_attention ON receipts (state, key) WHERE state NOT IN ('claimed', 'sent');
