-- SQLite edition of postgres/00019_receipts_fingerprint_parts.sql.

-- +goose Up
ALTER TABLE receipts ADD COLUMN fingerprint_parts TEXT;

-- +goose Down
ALTER TABLE receipts DROP COLUMN fingerprint_parts;
