-- SQLite edition of postgres/00020_receipt_versions.sql: receipts store
-- their digest type and content version (NULL before this migration:
-- unknown), and a pin records a deliberate resend under a new version.

-- +goose Up
ALTER TABLE receipts ADD COLUMN digest_type TEXT;
ALTER TABLE receipts ADD COLUMN content_version TEXT;
ALTER TABLE snapshot_pins ADD COLUMN resend_detail TEXT;

-- +goose Down
ALTER TABLE snapshot_pins DROP COLUMN resend_detail;
ALTER TABLE receipts DROP COLUMN content_version;
ALTER TABLE receipts DROP COLUMN digest_type;
