-- What each run's read of the source found, per pin and shard: the
-- digests the pinned snapshot yields and the customers it suppressed or
-- skipped, so that "digest status" compares them with the ledger's counts
-- instead of reading the whole week (cmd/digest/weekstate.go). Counts and
-- key ids only: no customer data. The observations index lets status ask
-- whether a week has observations without reading the table.
--
-- week_state_counts counts each week's receipts by state, kept by
-- statement triggers on receipts in the same transaction as every insert,
-- state change and delete, whatever statement makes it: status reads the
-- week's counts there instead of scanning the week's partition (which has
-- no index on state: one would stop state changes from being HOT
-- updates). Each backend adds to its own slot (its pid modulo 64), so
-- that concurrent transactions do not wait on one counter row; a reader
-- sums the slots. A dropped partition's week is deleted with it (ledger
-- Prune).

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

CREATE TABLE week_state_counts (
    iso_week text   NOT NULL,
    state    text   NOT NULL,
    slot     int    NOT NULL,
    n        bigint NOT NULL,
    PRIMARY KEY (iso_week, state, slot)
);

-- +goose StatementBegin
CREATE FUNCTION week_state_counts_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO week_state_counts AS c (iso_week, state, slot, n)
        SELECT iso_week, state, pg_backend_pid() % 64, count(*) FROM new_rows GROUP BY iso_week, state
        ON CONFLICT (iso_week, state, slot) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO week_state_counts AS c (iso_week, state, slot, n)
        SELECT iso_week, state, pg_backend_pid() % 64, -count(*) FROM old_rows GROUP BY iso_week, state
        ON CONFLICT (iso_week, state, slot) DO UPDATE SET n = c.n + excluded.n;
    ELSE
        INSERT INTO week_state_counts AS c (iso_week, state, slot, n)
        SELECT iso_week, state, pg_backend_pid() % 64, sum(d) FROM (
            SELECT o.iso_week, o.state, -1 AS d FROM old_rows o
            UNION ALL
            SELECT n.iso_week, n.state, 1 AS d FROM new_rows n) x
        GROUP BY iso_week, state HAVING sum(d) <> 0
        ON CONFLICT (iso_week, state, slot) DO UPDATE SET n = c.n + excluded.n;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER receipts_count_insert AFTER INSERT ON receipts
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION week_state_counts_add();
CREATE TRIGGER receipts_count_update AFTER UPDATE ON receipts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION week_state_counts_add();
CREATE TRIGGER receipts_count_delete AFTER DELETE ON receipts
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION week_state_counts_add();

INSERT INTO week_state_counts (iso_week, state, slot, n)
SELECT iso_week, state, 0, count(*) FROM receipts GROUP BY iso_week, state;

-- +goose Down
DROP TRIGGER receipts_count_delete ON receipts;
DROP TRIGGER receipts_count_update ON receipts;
DROP TRIGGER receipts_count_insert ON receipts;
DROP FUNCTION week_state_counts_add();
DROP TABLE week_state_counts;
DROP INDEX observations_week;
DROP TABLE week_expectations;
