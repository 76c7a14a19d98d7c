package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/internal/rules"
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
	staleClaimsSQL       = queries.Get("StaleClaims")

	pruneProviderEventsSQL = queries.Get("PruneProviderEvents")
	pruneSoftBouncesSQL    = queries.Get("PruneSoftBounces")
	oldestRowsSQL          = queries.Get("OldestRows")

	droppablePartitionsSQL = queries.Get("DroppablePartitions")
	lockReceiptsSQL        = queries.Get("LockReceipts")
	tombstoneWeeksSQL      = queries.Get("TombstoneWeeks")
)

// The statements on one partition of receipts, named by %s (a quoted
// identifier: DDL and table names take no parameters).
const (
	// partitionWeeksSQL: the partition's receipts by week, each week's
	// count and whether all of them are prunable ($1 cutoff, $2 states)
	// with no run of the week since the cutoff.
	partitionWeeksSQL = `SELECT r.iso_week, count(*), bool_and(r.updated_at < $1 AND r.state = ANY($2))
    AND NOT EXISTS (SELECT 1 FROM week_runs w WHERE w.iso_week = r.iso_week AND w.last_started_at >= $1)
FROM %s r GROUP BY r.iso_week ORDER BY r.iso_week`
	// partitionEventsSQL deletes the history of the partition's receipts.
	partitionEventsSQL = `DELETE FROM receipt_events e USING %s r WHERE e.key = r.key`
	// dropPartitionSQL: without DETACH first, which would change nothing
	// under the ACCESS EXCLUSIVE lock on receipts that both take.
	dropPartitionSQL = `DROP TABLE %s`
)

// Prune removes settled receipts, their events and old observations, and
// leaves a tombstone for every pin of each week it took receipts from. Two
// transactions, each holding a SHARE lock on week_runs throughout, so a
// run starting meanwhile (StartWeek) waits and then sees the tombstone:
// the first drops whole the week partitions that hold nothing but
// prunable receipts (dropPartitions); the second deletes the prunable
// receipts left, of weeks only partly prunable or in the DEFAULT
// partition, as it did before receipts was partitioned, and then the
// provider events and soft-bounce counts past their horizons but those
// the receipts left still need (ledger.EventRetention).
func (s *Store) Prune(ctx context.Context, p ledger.PruneRequest) (_ ledger.PruneResult, err error) {
	defer classify(&err)
	if err := p.Validate(); err != nil {
		return ledger.PruneResult{}, err
	}
	now, err := s.pruneNow(ctx)
	if err != nil {
		return ledger.PruneResult{}, fmt.Errorf("prune: %w", err)
	}
	// Fixed once: every statement below compares with the same cutoffs,
	// which only get further behind the server's clock as they run.
	if p.OlderThan > 0 {
		p.Before, p.OlderThan = p.Cutoff(now).UTC().Truncate(time.Microsecond), 0
	}
	events := p.Events.Cutoffs(now)
	var ends ledger.PruneResult
	if err := ledger.EndStaleClaims(ctx, p.DryRun, &ends, p.Before, s); err != nil {
		return ledger.PruneResult{}, fmt.Errorf("prune: end stale claims: %w", err)
	}
	if p.DryRun {
		res, err := s.prunable(ctx, p)
		if err != nil {
			return ledger.PruneResult{}, fmt.Errorf("prune (dry run): %w", err)
		}
		res.ClaimsEnded = ends.ClaimsEnded
		if err := pruneEvents(ctx, s.pool, p, events, &res); err != nil {
			return ledger.PruneResult{}, fmt.Errorf("prune (dry run): %w", err)
		}
		return res, nil
	}
	dropped, err := s.dropPartitions(ctx, p)
	if err != nil {
		return ledger.PruneResult{}, fmt.Errorf("prune: %w", err)
	}
	var res ledger.PruneResult
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
		if _, err = tx.Exec(ctx, pruneObservationsSQL, p.Before); err != nil {
			return err
		}
		// After the receipts: an event of a receipt deleted above is no
		// longer evidence of anything.
		return pruneEvents(ctx, tx, p, events, &res)
	})
	if err != nil {
		return ledger.PruneResult{}, fmt.Errorf("prune: %w", err)
	}
	for _, w := range dropped {
		res.AddDropped(w.Week, w.Receipts)
	}
	sortWeeks(&res)
	res.ClaimsEnded, res.ClaimsHeld = ends.ClaimsEnded, ends.ClaimsHeld
	// Prune run as the owner of receipts, every month or so, keeps the
	// coming weeks' partitions made between deploys that run migrate; as
	// another role it could make none, and says nothing of it (a run's
	// start warns for its own week).
	if _, owner, err := s.partitionExists(ctx, "receipts"); err == nil && owner {
		s.ensurePartitionsAhead(ctx)
	}
	return res, nil
}

// StaleClaims lists the claims a prune with cutoff ends
// (ledger.StaleClaimEnder).
func (s *Store) StaleClaims(ctx context.Context, cutoff time.Time, after digest.Key, limit int) (_ []ledger.StaleClaim, err error) {
	defer classify(&err)
	rows, err := s.pool.Query(ctx, staleClaimsSQL, cutoff, s.clockArg(), string(after), limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.StaleClaim, error) {
		var (
			c         ledger.StaleClaim
			key, week string
		)
		if err := row.Scan(&key, &week); err != nil {
			return c, err
		}
		c.Key = digest.Key(key)
		c.Week, err = digest.ParseISOWeek(week)
		return c, err
	})
}

// pruneNow is the ledger's clock a prune cuts by (see ledger.PruneRequest):
// the earlier of the server's now() and the store's own clock. The
// server's clock is the one a prune must trust: a prune whose machine runs
// ahead would otherwise take the receipts of a week run seconds earlier.
// The store's clock only ever moves the cutoffs back (a process behind
// prunes less), and is what the contract suite's fake clocks set.
func (s *Store) pruneNow(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.pool.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		return time.Time{}, err
	}
	if own := s.nowUTC(); own.Before(now) {
		now = own
	}
	return now, nil
}

// pruneEvents prunes (p.DryRun: counts) on q the provider events and
// soft-bounce counts past the cutoffs c, keeping the evidence
// (ledger.EventRetention), and sets their counts in res.
func pruneEvents(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, p ledger.PruneRequest, c ledger.EventCutoffs, res *ledger.PruneResult) error {
	if !c.ProviderEvents.IsZero() {
		err := q.QueryRow(ctx, pruneProviderEventsSQL, c.ProviderEvents, p.Before, p.PrunableStates(), p.DryRun).Scan(&res.ProviderEvents)
		if err != nil {
			return fmt.Errorf("provider events: %w", err)
		}
	}
	if !c.SoftBounces.IsZero() {
		err := q.QueryRow(ctx, pruneSoftBouncesSQL, c.SoftBounces, c.StreakWeek.String(), p.DryRun).Scan(&res.SoftBounces)
		if err != nil {
			return fmt.Errorf("soft bounces: %w", err)
		}
	}
	return nil
}

// OldestRows returns the oldest row of each kept table (ledger.Retention).
func (s *Store) OldestRows(ctx context.Context) (_ []ledger.OldestRow, err error) {
	defer classify(&err)
	var (
		week                        *string
		observed, received, bounced *time.Time
	)
	if err := s.pool.QueryRow(ctx, oldestRowsSQL).Scan(&week, &observed, &received, &bounced); err != nil {
		return nil, fmt.Errorf("oldest rows: %w", err)
	}
	receipts, err := ledger.OldestReceipts(deref(week))
	if err != nil {
		return nil, err
	}
	return []ledger.OldestRow{receipts,
		{Table: ledger.TableObservations, At: utcOrZero(observed)},
		{Table: ledger.TableProviderEvents, At: utcOrZero(received)},
		{Table: ledger.TableSoftBounces, At: utcOrZero(bounced)},
	}, nil
}

// prunable is a dry run: what Prune would remove, by week, with the weeks
// whose partitions it would drop marked.
func (s *Store) prunable(ctx context.Context, p ledger.PruneRequest) (ledger.PruneResult, error) {
	whole := map[string]bool{}
	_, owner, err := s.partitionExists(ctx, "receipts")
	if err != nil {
		return ledger.PruneResult{}, err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if !owner {
			return nil // it would delete row by row (see dropPartitions)
		}
		parts, err := droppable(ctx, tx, p)
		if err != nil {
			return err
		}
		for _, part := range parts {
			weeks, err := partitionWeeks(ctx, tx, part, p)
			if err != nil {
				return err
			}
			for _, w := range weeks {
				whole[w.Week] = true
			}
		}
		return nil
	})
	if err != nil {
		return ledger.PruneResult{}, err
	}
	var byWeek ledger.PruneResult
	rows, err := s.pool.Query(ctx, prunableByWeekSQL, p.Before, p.PrunableStates())
	if err == nil {
		err = collectWeeks(rows, &byWeek)
	}
	if err != nil {
		return ledger.PruneResult{}, err
	}
	var res ledger.PruneResult
	for _, w := range byWeek.Weeks {
		if whole[w.Week] {
			res.AddDropped(w.Week, w.Receipts)
		} else {
			res.Add(w.Week, w.Receipts)
		}
	}
	return res, nil
}

// dropPartitions drops the week partitions of receipts that hold nothing
// but receipts p prunes, with their events, leaving the tombstones a
// DELETE of those receipts would, and returns their weeks. It finds them
// without locking receipts, then takes receipts' ACCESS EXCLUSIVE lock
// (which the drop needs; it blocks every claim and finish until the
// commit) and reads each again before dropping it: meanwhile an operator
// may have released a held receipt, or a run that started before the
// cutoff claimed one. When the lock stays busy for partitionLockTimeout,
// or the role does not own receipts (dropping a table takes its owner), it
// drops nothing: Prune's DELETE then takes those receipts.
func (s *Store) dropPartitions(ctx context.Context, p ledger.PruneRequest) ([]ledger.PrunedWeek, error) {
	if _, owner, err := s.partitionExists(ctx, "receipts"); err != nil || !owner {
		if err == nil {
			s.log.InfoContext(ctx, "the database role does not own receipts: no partition dropped, the prunable receipts are deleted row by row")
		}
		return nil, err
	}
	var dropped []ledger.PrunedWeek
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		dropped = nil
		if _, err := tx.Exec(ctx, lockWeekRunsSQL); err != nil {
			return err
		}
		parts, err := droppable(ctx, tx, p)
		if err != nil || len(parts) == 0 {
			return err
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", partitionLockTimeout.Milliseconds())); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, lockReceiptsSQL); err != nil {
			return err
		}
		var weeks []string
		var counts []int64
		for _, part := range parts {
			pw, err := partitionWeeks(ctx, tx, part, p)
			if err != nil {
				return err
			}
			if len(pw) == 0 || slices.ContainsFunc(pw, func(w ledger.PrunedWeek) bool { return !w.Dropped }) {
				continue // changed since: no longer prunable whole
			}
			name := pgx.Identifier{part}.Sanitize()
			if _, err := tx.Exec(ctx, fmt.Sprintf(partitionEventsSQL, name)); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf(dropPartitionSQL, name)); err != nil {
				return err
			}
			var gone []string
			for _, w := range pw {
				weeks, counts = append(weeks, w.Week), append(counts, w.Receipts)
				dropped = append(dropped, ledger.PrunedWeek{Week: w.Week, Receipts: w.Receipts, Dropped: true})
				gone = append(gone, w.Week)
			}
			// A dropped partition fires no delete trigger: its weeks'
			// counters go with it.
			if _, err := tx.Exec(ctx, dropWeekCountsSQL, gone); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, tombstoneWeeksSQL, weeks, counts, s.nowUTC())
		return err
	})
	if isLockTimeout(err) {
		s.log.WarnContext(ctx, "receipts stayed locked: no partition dropped, the prunable receipts are deleted row by row")
		return nil, nil
	}
	return dropped, err
}

// droppable lists the partitions DroppablePartitions finds.
func droppable(ctx context.Context, tx pgx.Tx, p ledger.PruneRequest) ([]string, error) {
	rows, err := tx.Query(ctx, droppablePartitionsSQL, p.Before, p.PrunableStates())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// partitionWeeks reads partition part's receipts by week: the count, and
// in Dropped whether all of them are prunable.
func partitionWeeks(ctx context.Context, tx pgx.Tx, part string, p ledger.PruneRequest) ([]ledger.PrunedWeek, error) {
	rows, err := tx.Query(ctx, fmt.Sprintf(partitionWeeksSQL, pgx.Identifier{part}.Sanitize()), p.Before, p.PrunableStates())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.PrunedWeek, error) {
		var w ledger.PrunedWeek
		err := row.Scan(&w.Week, &w.Receipts, &w.Dropped)
		return w, err
	})
}

// isLockTimeout reports PostgreSQL's lock_timeout (lock_not_available).
func isLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == sqlstateLockNotAvailable
}

// sortWeeks orders res.Weeks oldest first.
func sortWeeks(res *ledger.PruneResult) {
	slices.SortStableFunc(res.Weeks, func(a, b ledger.PrunedWeek) int { return strings.Compare(a.Week, b.Week) })
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

// StartWeek records the start of a run of pin, creates the week's
// partition of receipts if it can, and returns the week's tombstone.
// The start is at, by the run's clock, which a prune compares with its
// cutoff by the server's: the run's clock stays because a prune cuts
// OlderThan (at least the 14-day floor of the replay horizon) back, so
// only a run whose clock is weeks behind would record a start older than
// the cutoff; and the contract suite's fake clocks drive it. The insert takes week_runs' ROW EXCLUSIVE lock, which waits
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
	// Before the run's first claim of the week: its receipts get their own
	// partition, which a prune can drop whole (see partition.go).
	s.ensurePartitionLogged(ctx, pin.Week)
	return stone, nil
}

// Tombstones returns the tombstones of week (zero: all), newest week first.
func (s *Store) Tombstones(ctx context.Context, week digest.ISOWeek) (_ []digest.PruneTombstone, err error) {
	defer classify(&err)
	rows, err := s.pool.Query(ctx, tombstonesSQL, rules.WeekOrAll(week))
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
	return t, rules.ParseTombstoneWeek(&t, week)
}
