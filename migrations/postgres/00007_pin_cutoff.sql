-- A week's cutoff is a decision (issue 19): a run pins as_of at the week's
-- end plus DIGEST_SETTLE, or earlier only when told (--early-cutoff), and
-- then the pin says it is partial. A pin moved by "digest repin" keeps
-- where it was (repinned_from), when (repinned_at) and by whom and why
-- (repin_detail). Older binaries ignore the new columns: a pin they make
-- is not partial, which is what they meant.

-- +goose Up
ALTER TABLE snapshot_pins
    ADD COLUMN partial boolean NOT NULL DEFAULT false,
    ADD COLUMN repinned_from timestamptz,
    ADD COLUMN repinned_at timestamptz,
    ADD COLUMN repin_detail text;

-- +goose Down
ALTER TABLE snapshot_pins
    DROP COLUMN repin_detail,
    DROP COLUMN repinned_at,
    DROP COLUMN repinned_from,
    DROP COLUMN partial;
