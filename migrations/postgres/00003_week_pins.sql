-- What a week's first run pins besides the snapshot cutoff: the time zone
-- its bounds were computed in and the key id its receipts are created
-- under (see digest.WeekPin). NULL in a pin made before this migration: the
-- next run of that week adopts its own zone and current key id, once.

-- +goose Up
ALTER TABLE snapshot_pins ADD COLUMN zone text, ADD COLUMN key_id text;

-- +goose Down
ALTER TABLE snapshot_pins DROP COLUMN key_id, DROP COLUMN zone;
