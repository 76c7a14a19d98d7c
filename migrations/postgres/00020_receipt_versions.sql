-- A content version is a new digest by design, and a receipt's key is an
-- HMAC of customer|iso_week|digest_type|content_version: the ledger could
-- not tell a week sent under v1 from one sent under v2, so a run of v2
-- resent the whole week without a word (issue 35). New receipts store
-- their digest type and content version, so that a run can count what
-- the week sent under another version and refuse it, and a week's pin
-- records who resent it under a new version on purpose and why
-- (run --resend-as-new-version). NULL in a receipt made before this
-- migration: its version is unknown, and a run counts it as "another
-- version" whenever the week is pinned under another version of its type.
-- Older binaries leave both NULL in the receipts they make. IF NOT
-- EXISTS: the tests that run this binary's claim on an older schema add
-- these columns by hand first.

-- +goose Up
ALTER TABLE receipts ADD COLUMN IF NOT EXISTS digest_type text, ADD COLUMN IF NOT EXISTS content_version text;
ALTER TABLE snapshot_pins ADD COLUMN IF NOT EXISTS resend_detail text;

-- +goose Down
ALTER TABLE snapshot_pins DROP COLUMN resend_detail;
ALTER TABLE receipts DROP COLUMN content_version, DROP COLUMN digest_type;
