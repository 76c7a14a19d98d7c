-- The finish to sent becomes a HOT update (heap-only: no new index entry,
-- less WAL). PostgreSQL (15) makes an update HOT only when no indexed
-- column, predicate columns included, changes value. The attention index
-- held state in its key and its predicate, so the finish, which changes
-- state, always added an entry to every index of receipts. It is now on
-- attention, a column PostgreSQL computes from state: the state when it
-- waits for someone (retryable, failed, held, quarantined, acknowledged),
-- NULL while claimed or sent. The happy path (claimed, then sent) leaves
-- it NULL, so neither the send mark nor the finish changes an indexed
-- column; every other transition changes it, and the index follows, by
-- construction, with no statement to keep it. The DEFAULT partition's
-- (iso_week, state) index, which held state too, becomes (iso_week): it
-- finds a week's rows there, and reads their state from the heap.
--
-- Adding a stored generated column rewrites every partition of receipts
-- (an exclusive lock for the rewrite's duration: run it between weeks).

-- +goose Up
ALTER TABLE receipts ADD COLUMN attention text
    GENERATED ALWAYS AS (CASE WHEN state NOT IN ('claimed', 'sent') THEN state END) STORED;
DROP INDEX receipts_attention;
CREATE INDEX receipts_attention ON receipts (attention, key) WHERE attention IS NOT NULL;
DROP INDEX receipts_default_week_state;
CREATE INDEX receipts_default_week ON receipts_default (iso_week);

-- +goose Down
DROP INDEX receipts_default_week;
CREATE INDEX receipts_default_week_state ON receipts_default (iso_week, state);
DROP INDEX receipts_attention;
ALTER TABLE receipts DROP COLUMN attention;
CREATE INDEX receipts_attention ON receipts (state, key) WHERE state NOT IN ('claimed', 'sent');
