-- week_state_counts also counts by key id, so that a run's pin (which
-- counts the week's receipts by key id: digest.WeekPin.ReceiptsByKeyID)
-- and its recorded expectation (the receipts under another key id:
-- ledger.Expectation.OtherKeyIDs) read a few counter rows instead of the
-- week's whole partition: 3.7 s for one of 9,000,000 receipts, at the
-- start and at the end of every shard's run (docs/capacity.md).
--
-- No statement changes a receipt's key or key id, but the trigger counts
-- an update's old and new rows by key id as it does by state, so that one
-- that did would keep the counts right. The counters are counted again
-- from receipts, every week, under a lock that keeps writers out until
-- the migration commits: a receipt changed meanwhile would be counted by
-- neither the old function nor the recount. Runs wait for it (about a
-- minute per 50 million receipts); readers do not.

-- +goose Up
LOCK TABLE receipts IN SHARE ROW EXCLUSIVE MODE;
ALTER TABLE week_state_counts ADD COLUMN key_id text NOT NULL DEFAULT '';
ALTER TABLE week_state_counts DROP CONSTRAINT week_state_counts_pkey;
DELETE FROM week_state_counts;
INSERT INTO week_state_counts (iso_week, state, key_id, slot, n)
SELECT iso_week, state, key_id, 0, count(*) FROM receipts GROUP BY iso_week, state, key_id;
ALTER TABLE week_state_counts ALTER COLUMN key_id DROP DEFAULT;
ALTER TABLE week_state_counts ADD PRIMARY KEY (iso_week, state, key_id, slot);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION week_state_counts_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO week_state_counts AS c (iso_week, state, key_id, slot, n)
        SELECT iso_week, state, key_id, pg_backend_pid(), count(*) FROM new_rows GROUP BY iso_week, state, key_id
        ON CONFLICT (iso_week, state, key_id, slot) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO week_state_counts AS c (iso_week, state, key_id, slot, n)
        SELECT iso_week, state, key_id, pg_backend_pid(), -count(*) FROM old_rows GROUP BY iso_week, state, key_id
        ON CONFLICT (iso_week, state, key_id, slot) DO UPDATE SET n = c.n + excluded.n;
    ELSE
        INSERT INTO week_state_counts AS c (iso_week, state, key_id, slot, n)
        SELECT iso_week, state, key_id, pg_backend_pid(), sum(d) FROM (
            SELECT o.iso_week, o.state, o.key_id, -1 AS d FROM old_rows o
            UNION ALL
            SELECT n.iso_week, n.state, n.key_id, 1 AS d FROM new_rows n) x
        GROUP BY iso_week, state, key_id HAVING sum(d) <> 0
        ON CONFLICT (iso_week, state, key_id, slot) DO UPDATE SET n = c.n + excluded.n;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
LOCK TABLE receipts IN SHARE ROW EXCLUSIVE MODE;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION week_state_counts_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO week_state_counts AS c (iso_week, state, slot, n)
        SELECT iso_week, state, pg_backend_pid(), count(*) FROM new_rows GROUP BY iso_week, state
        ON CONFLICT (iso_week, state, slot) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO week_state_counts AS c (iso_week, state, slot, n)
        SELECT iso_week, state, pg_backend_pid(), -count(*) FROM old_rows GROUP BY iso_week, state
        ON CONFLICT (iso_week, state, slot) DO UPDATE SET n = c.n + excluded.n;
    ELSE
        INSERT INTO week_state_counts AS c (iso_week, state, slot, n)
        SELECT iso_week, state, pg_backend_pid(), sum(d) FROM (
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
CREATE TEMPORARY TABLE week_state_counts_down ON COMMIT DROP AS
SELECT iso_week, state, slot, sum(n)::bigint AS n FROM week_state_counts GROUP BY iso_week, state, slot;
DELETE FROM week_state_counts;
ALTER TABLE week_state_counts DROP CONSTRAINT week_state_counts_pkey;
ALTER TABLE week_state_counts DROP COLUMN key_id;
INSERT INTO week_state_counts (iso_week, state, slot, n) SELECT iso_week, state, slot, n FROM week_state_counts_down;
ALTER TABLE week_state_counts ADD PRIMARY KEY (iso_week, state, slot);
