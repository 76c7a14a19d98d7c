-- SQLite edition of postgres/00003_week_pins.sql: the zone and key id a
-- week's first run pins. NULL in a pin made before this migration: the
-- next run of that week adopts its own zone and current key id, once.

-- +goose Up
ALTER TABLE snapshot_pins ADD COLUMN zone TEXT;
ALTER TABLE snapshot_pins ADD COLUMN key_id TEXT;

-- +goose Down
ALTER TABLE snapshot_pins DROP COLUMN key_id;
ALTER TABLE snapshot_pins DROP COLUMN zone;
