package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// The retention statements, in sql/retention.sql.
var (
	prunableByWeekSQL    = queries.Get("PrunableByWeek")
	lockWeekRunsSQL      = queries.Get("LockWeekRuns")
	pruneSQL             = queries.Get("Prune")
	pruneObservationsSQL = queries.Get("PruneObservations")
	startWeekSQL         = queries.Get("StartWeek")
	weekTombstoneSQL     = queries.Get("WeekTombstone")
	tombstonesSQL        = queries.Get("Tombstones")
)

// Prune removes settled receipts, their events and old observations in one
// transaction, and leaves a tombstone for every pin of each week it took
// receipts from. It holds a SHARE lock on week_runs throughout, so a run
// starting meanwhile (StartWeek) waits and then sees the tombstone.
func (s *Store) Prune(ctx context.Context, p ledger.PruneRequest) (_ ledger.PruneResult, err error) {
	defer classify(&err)
	if err := p.Validate(); err != nil {
		return ledger.PruneResult{}, err
	}
	var res ledger.PruneResult
	if p.DryRun {
		rows, err := s.pool.Query(ctx, prunableByWeekSQL, p.Before, p.PrunableStates())
		if err == nil {
			err = collectWeeks(rows, &res)
		}
		if err != nil {
			return ledger.PruneResult{}, fmt.Errorf("prune (dry run): %w", err)
		}
		return res, nil
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = ledger.PruneResult{}
		if _, err := tx.Exec(ctx, lockWeekRunsSQL); err != nil {
			return err
		}
		// Data-modifying CTEs see one snapshot: the tombstones count
		// exactly the receipts this statement deleted.
		rows, err := tx.Query(ctx, pruneSQL, p.Before, p.PrunableStates(), s.nowUTC())
		if err != nil {
			return err
		}
		if err := collectWeeks(rows, &res); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, pruneObservationsSQL, p.Before)
		return err
	})
	if err != nil {
		return ledger.PruneResult{}, fmt.Errorf("prune: %w", err)
	}
	return res, nil
}

func collectWeeks(rows pgx.Rows, res *ledger.PruneResult) error {
	var (
		week string
		n    int64
	)
	_, err := pgx.ForEachRow(rows, []any{&week, &n}, func() error {
		res.Add(week, n)
		return nil
	})
	return err
}

// StartWeek records the start of a run of pin and returns the week's
// tombstone. The insert takes week_runs' ROW EXCLUSIVE lock, which waits
// for a prune under way; the read after it is a new statement and sees
// what that prune wrote.
func (s *Store) StartWeek(ctx context.Context, pin digest.SnapshotPin, at time.Time) (_ *digest.PruneTombstone, err error) {
	defer classify(&err)
	var stone *digest.PruneTombstone
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, startWeekSQL,
			pin.Type, pin.Week.String(), pin.Version, at.UTC().Truncate(time.Microsecond))
		if err != nil {
			return err
		}
		// The pin's own tombstone first, then one left for a week with no pin.
		t, err := scanPgTombstone(tx.QueryRow(ctx, weekTombstoneSQL, pin.Week.String(), pin.Type, pin.Version))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		stone = &t
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("start week %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
	}
	return stone, nil
}

// Tombstones returns the tombstones of week (zero: all), newest week first.
func (s *Store) Tombstones(ctx context.Context, week digest.ISOWeek) (_ []digest.PruneTombstone, err error) {
	defer classify(&err)
	rows, err := s.pool.Query(ctx, tombstonesSQL, ledger.WeekOrAll(week))
	if err != nil {
		return nil, fmt.Errorf("tombstones: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (digest.PruneTombstone, error) { return scanPgTombstone(row) })
	if err != nil {
		return nil, fmt.Errorf("tombstones: %w", err)
	}
	return list, nil
}

func scanPgTombstone(row pgx.Row) (digest.PruneTombstone, error) {
	var (
		t           digest.PruneTombstone
		week        string
		first, last time.Time
	)
	if err := row.Scan(&t.Pin.Type, &week, &t.Pin.Version, &t.ReceiptsPruned, &first, &last); err != nil {
		return t, err
	}
	t.FirstPrunedAt, t.LastPrunedAt = first.UTC(), last.UTC()
	return t, ledger.ParseTombstoneWeek(&t, week)
}
