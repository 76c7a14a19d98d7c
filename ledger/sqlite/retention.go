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
)

// Prune removes settled receipts, their events and old observations in one
// write transaction, and leaves a tombstone for every pin of each week it
// took receipts from. SQLite serialises it with StartWeek.
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
		cutoff := p.Cutoff(s.now()).UnixMicro()
		args := []any{cutoff, string(states)}
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
			return nil
		}
		if _, err := tx.ExecContext(ctx, pruneEventsSQL, args...); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, pruneReceiptsSQL, args...); err != nil {
			return err
		}
		now := s.nowUTC().UnixMicro()
		for _, w := range res.Weeks {
			_, err := tx.ExecContext(ctx, tombstoneSQL, w.Week, w.Receipts, now)
			if err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, pruneObservationsSQL, cutoff)
		return err
	})
	if err != nil {
		return ledger.PruneResult{}, fmt.Errorf("prune: %w", err)
	}
	return res, nil
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
