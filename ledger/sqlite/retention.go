package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// sqlitePrunable is the SQLite edition of pgPrunable for n prunable states:
// ?1 the cutoff, ?2… the states.
func sqlitePrunable(n int) string {
	states := make([]string, n)
	for i := range states {
		states[i] = fmt.Sprintf("?%d", i+2)
	}
	return `updated_at < ?1 AND state IN (` + strings.Join(states, ", ") + `)
    AND iso_week NOT IN (SELECT iso_week FROM week_runs WHERE last_started_at >= ?1)`
}

// Prune removes settled receipts, their events and old observations in one
// write transaction, and leaves a tombstone for every pin of each week it
// took receipts from. SQLite serialises it with StartWeek.
func (s *Store) Prune(ctx context.Context, p ledger.PruneRequest) (ledger.PruneResult, error) {
	if err := p.Validate(); err != nil {
		return ledger.PruneResult{}, err
	}
	states := p.PrunableStates()
	args := append([]any{p.Before.UnixMicro()}, stringArgs(states)...)
	where := sqlitePrunable(len(states))
	var res ledger.PruneResult
	err := s.write(ctx, func(tx sqliteTx) error {
		res = ledger.PruneResult{}
		rows, err := tx.QueryContext(ctx, `SELECT iso_week, count(*) FROM receipts WHERE `+where+`
GROUP BY iso_week ORDER BY iso_week`, args...)
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
		if _, err := tx.ExecContext(ctx, `DELETE FROM receipt_events WHERE key IN (SELECT key FROM receipts WHERE `+where+`)`, args...); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM receipts WHERE `+where, args...); err != nil {
			return err
		}
		now := s.nowUTC().UnixMicro()
		for _, w := range res.Weeks {
			// "WHERE true" lets SQLite parse ON CONFLICT after a SELECT.
			_, err := tx.ExecContext(ctx, `
INSERT INTO prune_tombstones (digest_type, iso_week, version, receipts_pruned, first_pruned_at, last_pruned_at)
SELECT coalesce(p.digest_type, ''), w.iso_week, coalesce(p.version, ''), ?2, ?3, ?3
FROM (SELECT ?1 AS iso_week) w LEFT JOIN snapshot_pins p ON p.iso_week = w.iso_week WHERE true
ON CONFLICT (iso_week, digest_type, version) DO UPDATE
SET receipts_pruned = receipts_pruned + excluded.receipts_pruned, last_pruned_at = excluded.last_pruned_at`,
				w.Week, w.Receipts, now)
			if err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM observations WHERE at < ?`, p.Before.UnixMicro())
		return err
	})
	if err != nil {
		return ledger.PruneResult{}, fmt.Errorf("prune: %w", err)
	}
	return res, nil
}

// StartWeek records the start of a run of pin and returns the week's
// tombstone, in one write transaction.
func (s *Store) StartWeek(ctx context.Context, pin digest.SnapshotPin, at time.Time) (*digest.PruneTombstone, error) {
	var stone *digest.PruneTombstone
	err := s.write(ctx, func(tx sqliteTx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO week_runs (digest_type, iso_week, version, last_started_at)
VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (iso_week, digest_type, version) DO UPDATE
SET last_started_at = max(last_started_at, excluded.last_started_at)`,
			pin.Type, pin.Week.String(), pin.Version, at.UnixMicro())
		if err != nil {
			return err
		}
		t, err := scanSQLiteTombstone(tx.QueryRowContext(ctx, `SELECT `+ledger.TombstoneColumns+` FROM prune_tombstones
WHERE iso_week = ?1 AND ((digest_type = ?2 AND version = ?3) OR (digest_type = '' AND version = ''))
ORDER BY digest_type DESC LIMIT 1`, pin.Week.String(), pin.Type, pin.Version))
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
func (s *Store) Tombstones(ctx context.Context, week digest.ISOWeek) ([]digest.PruneTombstone, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+ledger.TombstoneColumns+` FROM prune_tombstones
WHERE ?1 = '' OR iso_week = ?1 ORDER BY iso_week DESC, digest_type, version`, ledger.WeekOrAll(week))
	if err != nil {
		return nil, fmt.Errorf("tombstones: %w", err)
	}
	defer rows.Close()
	var list []digest.PruneTombstone
	for rows.Next() {
		t, err := scanSQLiteTombstone(rows)
		if err != nil {
			return nil, fmt.Errorf("tombstones: %w", err)
		}
		list = append(list, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tombstones: %w", err)
	}
	return list, nil
}

func scanSQLiteTombstone(row interface{ Scan(...any) error }) (digest.PruneTombstone, error) {
	var (
		t           digest.PruneTombstone
		week        string
		first, last sql.NullInt64
	)
	if err := row.Scan(&t.Pin.Type, &week, &t.Pin.Version, &t.ReceiptsPruned, &first, &last); err != nil {
		return t, err
	}
	t.FirstPrunedAt, t.LastPrunedAt = fromUs(first), fromUs(last)
	return t, ledger.ParseTombstoneWeek(&t, week)
}
