-- SQLite edition of postgres/00007_pin_cutoff.sql: partial (0/1), and
-- where a repin moved the cutoff from (Unix microseconds, like as_of),
-- when and why.

-- +goose Up
ALTER TABLE snapshot_pins ADD COLUMN partial INTEGER NOT NULL DEFAULT 0;
ALTER TABLE snapshot_pins ADD COLUMN repinned_from INTEGER;
ALTER TABLE snapshot_pins ADD COLUMN repinned_at INTEGER;
ALTER TABLE snapshot_pins ADD COLUMN repin_detail TEXT;

-- +goose Down
ALTER TABLE snapshot_pins DROP COLUMN repin_detail;
ALTER TABLE snapshot_pins DROP COLUMN repinned_at;
ALTER TABLE snapshot_pins DROP COLUMN repinned_from;
ALTER TABLE snapshot_pins DROP COLUMN partial;
