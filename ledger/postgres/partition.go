package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weeklydigest/digest/digest"
)

// receipts is partitioned by ISO week (migration 00006): one partition a
// week, receipts_YYYY_wNN, and receipts_default for the rows of a week
// that has none. A week's partition is created before its first claim:
// by each run's start (StartWeek) and ahead by Migrate. Creating one needs
// ownership of receipts; a role without it leaves the week to the DEFAULT
// partition, which works the same, only its prune is a DELETE.

// The SQLSTATEs of a partition that could not or need not be created.
const (
	sqlstateDuplicateTable        = "42P07" // a concurrent start created it first
	sqlstateUniqueViolation       = "23505" // the same race, seen on pg_class or pg_type
	sqlstateCheckViolation        = "23514" // the DEFAULT partition holds rows of the week
	sqlstateInsufficientPrivilege = "42501" // the role does not own receipts
)

// partitionLockTimeout bounds the wait for receipts' ACCESS EXCLUSIVE lock,
// which creating a partition takes: a run never waits long behind a prune
// or a long query for a partition the DEFAULT can stand in for.
const partitionLockTimeout = 5 * time.Second

// partitionWeeksAhead is how many weeks after this one Migrate creates
// partitions for: two months of weekly runs under a role that may not
// create them, between two migrations.
const partitionWeeksAhead = 8

// defaultPartition is the partition of the weeks that have none.
const defaultPartition = "receipts_default"

// weekPartition is the name of week's partition: receipts_2026_w48. The
// same rule as migration 00006's.
func weekPartition(week digest.ISOWeek) string {
	return "receipts_" + strings.ToLower(strings.ReplaceAll(week.String(), "-", "_"))
}

// Partition statements, in sql/partition.sql.
var (
	partitionExistsSQL  = queries.Get("PartitionExists")
	defaultHoldsWeekSQL = queries.Get("DefaultHoldsWeek")
	partitionGrantsSQL  = queries.Get("PartitionGrants")
)

// partitionOutcome says what ensurePartition found or did.
type partitionOutcome string

const (
	partitionCreated  partitionOutcome = "created"
	partitionExisted  partitionOutcome = "existed"
	partitionDefault  partitionOutcome = "default" // rows of the week are in the DEFAULT partition
	partitionNotAllow partitionOutcome = "not permitted"
	partitionBusy     partitionOutcome = "lock timeout"
)

// ensurePartition creates week's partition unless it exists. It leaves the
// week to the DEFAULT partition when that already holds rows of the week
// (PostgreSQL would refuse the partition: those rows would belong to it),
// when the role may not create partitions, or when receipts stayed locked
// for partitionLockTimeout; those outcomes are not errors, since every
// statement works the same on the DEFAULT partition. Two starts of the same
// week may race: the loser sees the partition created.
func (s *Store) ensurePartition(ctx context.Context, week digest.ISOWeek) (partitionOutcome, error) {
	name := weekPartition(week)
	exists, owner, err := s.partitionExists(ctx, name)
	if err != nil {
		return "", fmt.Errorf("partition %s: %w", name, err)
	}
	switch {
	case exists:
		return partitionExisted, nil
	case !owner:
		return partitionNotAllow, nil
	}
	if err := s.pool.QueryRow(ctx, defaultHoldsWeekSQL, week.String()).Scan(&exists); err != nil {
		return "", fmt.Errorf("partition %s: %w", name, err)
	}
	if exists {
		return partitionDefault, nil
	}
	// DDL takes no parameters: the week is a validated ISOWeek ("2026-W48",
	// digits and "-W" only), quoted as a literal all the same.
	create := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s PARTITION OF receipts FOR VALUES IN (%s) WITH (fillfactor = 50)",
		pgx.Identifier{name}.Sanitize(), quoteLiteral(week.String()))
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", partitionLockTimeout.Milliseconds())); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, create); err != nil {
			return err
		}
		return grantLikeReceipts(ctx, tx, pgx.Identifier{name}.Sanitize())
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case sqlstateDuplicateTable, sqlstateUniqueViolation:
			return partitionExisted, nil
		case sqlstateCheckViolation:
			return partitionDefault, nil
		case sqlstateInsufficientPrivilege:
			return partitionNotAllow, nil
		case sqlstateLockNotAvailable:
			return partitionBusy, nil
		}
	}
	if err != nil {
		return "", fmt.Errorf("partition %s: %w", name, err)
	}
	return partitionCreated, nil
}

// grantLikeReceipts gives the new partition named ident the SELECT and
// UPDATE grants receipts has, so that a role that may update receipts
// (the job role of docs/security.md) may mark sends in the partition
// directly (startFor), in tx, the transaction that created it.
func grantLikeReceipts(ctx context.Context, tx pgx.Tx, ident string) error {
	rows, err := tx.Query(ctx, partitionGrantsSQL, ident)
	if err != nil {
		return err
	}
	grants, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, g := range grants {
		if _, err := tx.Exec(ctx, g); err != nil {
			return fmt.Errorf("%s: %w", g, err)
		}
	}
	return nil
}

// partitionExists reports whether relation name exists and whether the
// role may create and drop partitions of receipts (it owns receipts).
func (s *Store) partitionExists(ctx context.Context, name string) (exists, owner bool, err error) {
	err = s.pool.QueryRow(ctx, partitionExistsSQL, name).Scan(&exists, &owner)
	return exists, owner, err
}

// ensurePartitionLogged is ensurePartition for a run's start: it logs what
// was not done and never fails the run for it (the DEFAULT partition takes
// the week's receipts).
func (s *Store) ensurePartitionLogged(ctx context.Context, week digest.ISOWeek) {
	out, err := s.ensurePartition(ctx, week)
	name := weekPartition(week)
	switch {
	case err != nil:
		s.log.WarnContext(ctx, "could not create the week's receipts partition: its receipts go to the default partition",
			"week", week.String(), "partition", name, "error", err)
	case out == partitionCreated:
		s.log.InfoContext(ctx, "created the week's receipts partition", "week", week.String(), "partition", name)
	case out == partitionDefault:
		s.log.InfoContext(ctx, "the week's receipts are in the default partition already: no partition created",
			"week", week.String(), "partition", defaultPartition)
	case out == partitionNotAllow:
		s.log.WarnContext(ctx, "the database role may not create the week's receipts partition (it must own receipts; "+
			"digest migrate creates them ahead, see docs/operations.md): its receipts go to the default partition",
			"week", week.String(), "partition", name)
	case out == partitionBusy:
		s.log.WarnContext(ctx, "receipts stayed locked: the week's receipts partition was not created, its receipts go to the default partition",
			"week", week.String(), "partition", name)
	}
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
