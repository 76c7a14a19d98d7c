-- Every column holding a digest key or an address key compares bytewise
-- (COLLATE "C"), whatever the database's default collation. The keys are
-- HMACs in hex behind a key id: a linguistic collation orders them no
-- better, and costs every comparison of a B-tree descent a strcoll()
-- call. On a database created with en_US.UTF-8 (the default of most
-- managed PostgreSQL services) the ledger's statements cost 128-141 µs of
-- backend CPU a digest before this migration and 90-91 µs after
-- (TestCostPerDigest, docs/benchmarks.md), as on a C.UTF-8 database.
--
-- Equality is unchanged (every collation here is deterministic: equal
-- means the same bytes), and a key compared with a text of the default
-- collation (a parameter, another table's column) is compared under "C".
-- The order of keys in listings becomes byte order.
--
-- The tables are not rewritten; the indexes on these columns are rebuilt,
-- under an ACCESS EXCLUSIVE lock on each table until the migration
-- commits: runs, status and "digest serve" wait for it (docs/benchmarks.md
-- has its time at a million receipts). PostgreSQL before 17 counts the
-- collation of a column a prepared statement returns as part of its
-- type: a process that prepared its statements before the migration gets
-- "cached plan must not change result type" once from each of them after
-- it. A run's batches (claims, marks, finishes, suppression look-ups) are
-- sent again, prepared anew (ledger/postgres sendBatch); its other reads
-- and "digest serve"'s fail once. Migrate between runs.

-- +goose Up
ALTER TABLE receipts ALTER COLUMN key TYPE text COLLATE "C", ALTER COLUMN address_key TYPE text COLLATE "C";
ALTER TABLE receipt_events ALTER COLUMN key TYPE text COLLATE "C";
ALTER TABLE observations ALTER COLUMN key TYPE text COLLATE "C";
ALTER TABLE suppressions ALTER COLUMN key TYPE text COLLATE "C";
ALTER TABLE suppression_events ALTER COLUMN key TYPE text COLLATE "C";
ALTER TABLE provider_events ALTER COLUMN key TYPE text COLLATE "C", ALTER COLUMN address_key TYPE text COLLATE "C";
ALTER TABLE soft_bounces ALTER COLUMN address_key TYPE text COLLATE "C";

-- +goose Down
ALTER TABLE soft_bounces ALTER COLUMN address_key TYPE text COLLATE "default";
ALTER TABLE provider_events ALTER COLUMN key TYPE text COLLATE "default", ALTER COLUMN address_key TYPE text COLLATE "default";
ALTER TABLE suppression_events ALTER COLUMN key TYPE text COLLATE "default";
ALTER TABLE suppressions ALTER COLUMN key TYPE text COLLATE "default";
ALTER TABLE observations ALTER COLUMN key TYPE text COLLATE "default";
ALTER TABLE receipt_events ALTER COLUMN key TYPE text COLLATE "default";
ALTER TABLE receipts ALTER COLUMN key TYPE text COLLATE "default", ALTER COLUMN address_key TYPE text COLLATE "default";
