-- Every partition of receipts keeps half of each page free (fillfactor 50,
-- was 70), the room for the new row versions of the happy path's two
-- updates, the send mark and the finish. A run claims 100 receipts into
-- about four fresh pages and marks them 25 at a time: with 30% of a page
-- free, a mark found room on the page for fewer than half of its 25 new
-- versions (the old ones are not dead until the mark commits), and the
-- rest went to other pages with a new primary-key entry each. With 50%,
-- 1.85 of the 2 updates a digest are HOT instead of 1.40, and the ledger
-- writes 15% less WAL a digest (807 bytes instead of 945) for a heap 5%
-- larger (TestCostPerDigest, docs/benchmarks.md). New partitions get it
-- when created (partition.go); here the existing ones, and the DEFAULT.
-- Only pages written from now on follow it; no row moves. SET (fillfactor)
-- takes a SHARE UPDATE EXCLUSIVE lock: runs go on meanwhile.

-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE p regclass;
BEGIN
    FOR p IN SELECT relid FROM pg_partition_tree('receipts') WHERE isleaf LOOP
        EXECUTE format('ALTER TABLE %s SET (fillfactor = 50)', p);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE p regclass;
BEGIN
    FOR p IN SELECT relid FROM pg_partition_tree('receipts') WHERE isleaf LOOP
        EXECUTE format('ALTER TABLE %s SET (fillfactor = 70)', p);
    END LOOP;
END
$$;
-- +goose StatementEnd
