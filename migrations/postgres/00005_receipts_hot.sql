-- Room on each page for a receipt's next version, so that its updates can
-- stay HOT (heap-only: no new index entries, less WAL). The send mark
-- changes no indexed column, yet with pages filled by inserts its new
-- version never fit beside the old one: every mark went to another page
-- and into every index. Measured over 10,000 digests in batches of 100
-- (TestCostPerDigest): fillfactor 100 → 0 HOT updates per digest, 85 →
-- 0.24, 70 → 0.48 (about every other send mark), 50 → 0.65-0.96 with
-- the heap no smaller; WAL per digest 1.6 KB → 1.4 KB at 70, and the heap
-- per digest smaller (597 → 541 B): the updates that do not fit no longer
-- move rows to new pages. The finish to sent changes state, which both
-- receipts indexes hold, so it is never HOT (see docs/scaling.md).
-- Existing pages keep their fill until rewritten.
--
-- first_run_id: the run of the receipt's first claim, which writes no
-- history row any more (the receipt tells it; see ledger.ReceiptStory).
-- Set by the claim or quarantine that first replaces run_id; NULL until
-- then (run_id is still the first claim's), so the happy path stores
-- nothing more. Receipts made before this migration have their first
-- claim's history row.

-- +goose Up
ALTER TABLE receipts SET (fillfactor = 70);
ALTER TABLE receipts ADD COLUMN first_run_id text;

-- +goose Down
ALTER TABLE receipts DROP COLUMN first_run_id;
ALTER TABLE receipts RESET (fillfactor);
