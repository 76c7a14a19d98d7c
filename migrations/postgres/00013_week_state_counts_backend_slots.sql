-- Each backend counts into a slot of its own: its pid, no longer its pid
-- modulo 64. Two live backends never share a pid, so no transaction ever
-- waits on another's counter row, and the counters can take no part in a
-- deadlock. With slots shared by pid modulo 64, two backends of the same
-- slot (likely among a few dozen: eight shards of four connections, say)
-- each locked the counter rows of the states their statement changed, in
-- the order their plan aggregated them; a finish planned with a hash
-- aggregate and one planned with a sort could lock (week, claimed) and
-- (week, sent) in opposite orders and deadlock (seen with eight shard
-- processes on one database: a finish failed three times running and its
-- run exited failed). Readers already sum a week's slots; the rows of the
-- old slots (0-63) stay and are summed with the new ones. A week gains a
-- row per backend that changed its receipts, a few hundred at most, and
-- loses them with the week (prune).

-- +goose Up
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION week_state_counts_add() RETURNS trigger LANGUAGE plpgsql AS $$
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
