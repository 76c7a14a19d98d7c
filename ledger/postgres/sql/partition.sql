-- Week partitions of receipts (see partition.go).

-- name: PartitionExists
-- Whether relation $1 exists (in the search path), and whether the role
-- owns receipts (or is a member of its owner): only then may it create or
-- drop partitions.
SELECT to_regclass($1) IS NOT NULL, pg_has_role((SELECT relowner FROM pg_class WHERE oid = 'receipts'::regclass), 'USAGE');

-- name: DefaultHoldsWeek
-- Whether the DEFAULT partition holds a receipt of week $1 (then a
-- partition of that week cannot be created). Through receipts, whose
-- privileges are the only ones a run's role has: iso_week = $1 reaches the
-- DEFAULT partition alone when the week has no partition of its own.
SELECT EXISTS (SELECT 1 FROM receipts WHERE iso_week = $1 AND tableoid = 'receipts_default'::regclass);

-- name: WeekPartition
-- Whether relation $1 exists (in the search path), is a partition of
-- receipts (the week's, whose name it is: see weekPartition), and the role
-- may read and update it directly: a role granted receipts alone (the job
-- role of docs/security.md) reaches the partitions only through receipts.
SELECT coalesce((SELECT has_table_privilege(i.inhrelid, 'SELECT') AND has_table_privilege(i.inhrelid, 'UPDATE')
    FROM pg_inherits i WHERE i.inhrelid = to_regclass($1) AND i.inhparent = 'receipts'::regclass), false);

-- name: PartitionGrants
-- The GRANT statements that give partition $1 (a regclass's text) the
-- SELECT and UPDATE grants receipts has, to each role but its owner:
-- what the send mark needs to be aimed at the week's partition (startFor).
-- A role reads and updates those rows through receipts already; the
-- grants add no row it could not reach.
SELECT format('GRANT %s ON %s TO %s', a.privilege_type, $1::text,
        CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END)
FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
WHERE c.oid = 'receipts'::regclass AND a.privilege_type IN ('SELECT', 'UPDATE') AND a.grantee <> c.relowner
ORDER BY a.grantee, a.privilege_type;
