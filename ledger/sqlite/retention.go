package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/internal/rules"
)

// The retention statements, in sql/retention.sql.
var (
	prunableByWeekSQL    = queries.Get("PrunableByWeek")
	pruneEventsSQL       = queries.Get("PruneEvents")
	pruneReceiptsSQL     = queries.Get("PruneReceipts")
	tombstoneSQL         = queries.Get("Tombstone")
	pruneObservationsSQL = queries.Get("PruneObservations")
	startWeekSQL         = queries.Get("StartWeek")
	weekTombstoneSQL     = queries.Get("WeekTombstone")
	tombstonesSQL        = queries.Get("Tombstones")
	staleClaimsSQL       = queries.Get("StaleClaims")

	pruneProviderEventsSQL = queries.Get("PruneProviderEvents")
	pruneSoftBouncesSQL    = queries.Get("PruneSoftBounces")
	oldestRowsSQL          = queries.Get("OldestRows")
)

// Prune removes settled receipts, their events and old observations in one
// write transaction, and leaves a tombstone for every pin of each week it
// took receipts from; then, in the same transaction, the provider events
// and soft-bounce counts past their horizons but those the receipts left
// still need (ledger.EventRetention). SQLite serialises it with StartWeek.
func (s *Store) Prune(ctx context.Context, p ledger.PruneRequest) (_ ledger.PruneResult, err error) {
	defer classify(&err)
	if err := p.Validate(); err != nil {
		return ledger.PruneResult{}, err
	}
	states, err := json.Marshal(p.PrunableStates())
	if err != nil {
		return ledger.PruneResult{}, fmt.Errorf("prune: %w", err)
	}
	// Claims no run will finish end first (in their own transactions:
	// EndStaleClaims checks each again), by the cutoff the prune below uses or
	// an earlier one.
	var ends ledger.PruneResult
	if err := ledger.EndStaleClaims(ctx, p.DryRun, &ends, p.Cutoff(s.now()), s); err != nil {
		return ledger.PruneResult{}, fmt.Errorf("prune: end stale claims: %w", err)
	}
	var res ledger.PruneResult
	err = s.write(ctx, func(tx sqliteTx) error {
		res = ledger.PruneResult{ClaimsEnded: ends.ClaimsEnded, ClaimsHeld: ends.ClaimsHeld}
		// The store's clock is the database's: the embedded ledger has no
		// server, and this process's clock stamped every row compared
		// here. Read under the write lock, so a StartWeek committed just
		// before is compared with a later time, never an earlier one.
		now := s.now()
		cutoff := p.Cutoff(now).UnixMicro()
		args := []any{cutoff, string(states)}
		events := p.Events.Cutoffs(now)
		rows, err := tx.QueryContext(ctx, prunableByWeekSQL, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				week string
				n    int64
			)
			if err := rows.Scan(&week, &n); err != nil {
				return err
			}
			res.Add(week, n)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if p.DryRun {
			return pruneEvents(ctx, tx, args, events, &res, true)
		}
		if _, err := tx.ExecContext(ctx, pruneEventsSQL, args...); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, pruneReceiptsSQL, args...); err != nil {
			return err
		}
		stamp := s.nowUTC().UnixMicro()
		for _, w := range res.Weeks {
			_, err := tx.ExecContext(ctx, tombstoneSQL, w.Week, w.Receipts, stamp)
			if err != nil {
				return err
			}
		}
		if _, err = tx.ExecContext(ctx, pruneObservationsSQL, cutoff); err != nil {
			return err
		}
		// After the receipts: an event of a receipt deleted above is no
		// longer evidence of anything.
		return pruneEvents(ctx, tx, args, events, &res, false)
	})
	if err != nil {
		return ledger.PruneResult{}, fmt.Errorf("prune: %w", err)
	}
	return res, nil
}

// pruneEvents deletes in tx the provider events and soft-bounce counts past
// the cutoffs c, keeping the evidence (ledger.EventRetention), and sets
// their counts in res. receipts are the receipts' cutoff and states, which
// say which receipts the prune keeps. A dry run deletes in a savepoint it
// rolls back: it counts with the statements a prune runs.
func pruneEvents(ctx context.Context, tx sqliteTx, receipts []any, c ledger.EventCutoffs, res *ledger.PruneResult, dry bool) (err error) {
	if dry {
		if _, err := tx.Tx.ExecContext(ctx, "SAVEPOINT prune_dry_run"); err != nil {
			return err
		}
		defer func() {
			if _, rerr := tx.Tx.ExecContext(ctx, "ROLLBACK TO prune_dry_run"); rerr != nil && err == nil {
				err = rerr
			}
			if _, rerr := tx.Tx.ExecContext(ctx, "RELEASE prune_dry_run"); rerr != nil && err == nil {
				err = rerr
			}
		}()
	}
	deleted := func(q string, args ...any) (int64, error) {
		r, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return 0, err
		}
		return r.RowsAffected()
	}
	if !c.ProviderEvents.IsZero() {
		if res.ProviderEvents, err = deleted(pruneProviderEventsSQL, append([]any{c.ProviderEvents.UnixMicro()}, receipts...)...); err != nil {
			return fmt.Errorf("provider events: %w", err)
		}
	}
	if !c.SoftBounces.IsZero() {
		if res.SoftBounces, err = deleted(pruneSoftBouncesSQL, c.SoftBounces.UnixMicro(), c.StreakWeek.String()); err != nil {
			return fmt.Errorf("soft bounces: %w", err)
		}
	}
	return nil
}

// OldestRows returns the oldest row of each kept table (ledger.Retention).
func (s *Store) OldestRows(ctx context.Context) (_ []ledger.OldestRow, err error) {
	defer classify(&err)
	var (
		week                        sql.NullString
		observed, received, bounced sql.NullInt64
	)
	if err := s.db.QueryRowContext(ctx, oldestRowsSQL).Scan(&week, &observed, &received, &bounced); err != nil {
		return nil, fmt.Errorf("oldest rows: %w", err)
	}
	receipts, err := ledger.OldestReceipts(week.String)
	if err != nil {
		return nil, err
	}
	return []ledger.OldestRow{receipts,
		{Table: ledger.TableObservations, At: fromMicros(observed)},
		{Table: ledger.TableProviderEvents, At: fromMicros(received)},
		{Table: ledger.TableSoftBounces, At: fromMicros(bounced)},
	}, nil
}

// StaleClaims lists the claims a prune with cutoff ends
// (ledger.StaleClaimEnder).
func (s *Store) StaleClaims(ctx context.Context, cutoff time.Time, after digest.Key, limit int) (_ []ledger.StaleClaim, err error) {
	defer classify(&err)
	var clock any // NULL: SQLite's own
	if s.ledgerNow != nil {
		clock = s.ledgerNow().UnixMicro()
	}
	return queryAll(ctx, s.db, func(row rowScanner) (ledger.StaleClaim, error) {
		var (
			c         ledger.StaleClaim
			key, week string
			err       error
		)
		if err := row.Scan(&key, &week); err != nil {
			return c, err
		}
		c.Key = digest.Key(key)
		c.Week, err = digest.ParseISOWeek(week)
		return c, err
	}, staleClaimsSQL, cutoff.UnixMicro(), clock, string(after), limit)
}

// StartWeek records the start of a run of pin and returns the week's
// tombstone, in one write transaction.
func (s *Store) StartWeek(ctx context.Context, pin digest.SnapshotPin, at time.Time) (_ *digest.PruneTombstone, err error) {
	defer classify(&err)
	var stone *digest.PruneTombstone
	err = s.write(ctx, func(tx sqliteTx) error {
		_, err := tx.ExecContext(ctx, startWeekSQL,
			pin.Type, pin.Week.String(), pin.Version, at.UnixMicro())
		if err != nil {
			return err
		}
		t, err := scanSQLiteTombstone(tx.QueryRowContext(ctx, weekTombstoneSQL, pin.Week.String(), pin.Type, pin.Version))
		if errors.Is(err, sql.ErrNoRows) {
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
	list, err := queryAll(ctx, s.db, scanSQLiteTombstone, tombstonesSQL, rules.WeekOrAll(week))
	if err != nil {
		return nil, fmt.Errorf("tombstones: %w", err)
	}
	return list, nil
}

func scanSQLiteTombstone(row rowScanner) (digest.PruneTombstone, error) {
	var (
		t           digest.PruneTombstone
		week        string
		first, last sql.NullInt64
	)
	if err := row.Scan(&t.Pin.Type, &week, &t.Pin.Version, &t.ReceiptsPruned, &first, &last); err != nil {
		return t, err
	}
	t.FirstPrunedAt, t.LastPrunedAt = fromMicros(first), fromMicros(last)
	return t, rules.ParseTombstoneWeek(&t, week)
}
