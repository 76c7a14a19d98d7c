-- Every partition of receipts gets the SELECT and UPDATE grants receipts
-- has, to each role but its owner, as partitions created from now on get
-- them when created (partition.go, PartitionGrants). The send mark is
-- aimed at the week's partition when the run's role may read and update
-- it directly (startFor): planned without the other partitions, it costs
-- PostgreSQL about a tenth less a digest. A role granted receipts alone
-- (the job role of docs/security.md) marks through receipts, which works
-- the same. A role reads and updates those rows through receipts already:
-- the grants add no row it could not reach.
--
-- Down keeps the grants: an operator may have made the same ones, and
-- they are harmless without the statement that uses them.

-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE g record;
BEGIN
    FOR g IN
        SELECT p.relid::regclass AS part, a.privilege_type AS priv,
            CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END AS grantee
        FROM pg_partition_tree('receipts') p
        CROSS JOIN pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
        WHERE p.isleaf AND c.oid = 'receipts'::regclass
            AND a.privilege_type IN ('SELECT', 'UPDATE') AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT %s ON %s TO %s', g.priv, g.part, g.grantee);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
SELECT 1;
