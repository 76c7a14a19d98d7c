-- SQLite edition of postgres/00005_receipts_hot.sql (SQLite has no
-- fillfactor): first_run_id, the run of the receipt's first claim, which
-- writes no history row any more (the receipt tells it; see
-- ledger.ReceiptStory), set by the claim or quarantine that first replaces
-- run_id. Receipts made before this migration have their first claim's
-- history row.

-- +goose Up
ALTER TABLE receipts ADD COLUMN first_run_id TEXT;

-- +goose Down
ALTER TABLE receipts DROP COLUMN first_run_id;
