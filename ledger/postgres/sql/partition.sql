-- Week partitions of receipts (see partition.go).

-- name: PartitionExists
-- Whether relation $1 exists in the current schema's search path.
SELECT to_regclass($1) IS NOT NULL;

-- name: DefaultHoldsWeek
-- Whether the DEFAULT partition holds a receipt of week $1 (then a
-- partition of that week cannot be created).
SELECT EXISTS (SELECT 1 FROM receipts_default WHERE iso_week = $1);
