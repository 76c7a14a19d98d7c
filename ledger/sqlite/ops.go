package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

func scanSQLiteReceipt(row interface{ Scan(...any) error }) (ledger.Receipt, error) {
	var (
		r                                  ledger.Receipt
		key, state                         string
		lease, started, next, sent         sql.NullInt64
		firstClaimed, lastAttempt, updated sql.NullInt64
	)
	err := row.Scan(&key, &r.KeyID, &state, &r.Fingerprint, &r.ConflictFingerprint, &r.Attempts,
		&r.Token, &lease, &r.SendStarted, &started, &r.MaybeSent, &next,
		&firstClaimed, &lastAttempt, &sent, &r.ProviderRef, &r.LastError,
		&r.RunID, &r.Week, &updated)
	if err != nil {
		return ledger.Receipt{}, err
	}
	r.Key, r.State = digest.Key(key), digest.State(state)
	r.LeaseExpires, r.SendStartedAt, r.NextAttempt, r.SentAt = fromUs(lease), fromUs(started), fromUs(next), fromUs(sent)
	r.FirstClaimed, r.LastAttempt, r.UpdatedAt = fromUs(firstClaimed), fromUs(lastAttempt), fromUs(updated)
	return r, nil
}

// List returns receipts matching f, ordered by key.
func (s *Store) List(ctx context.Context, f ledger.ListFilter) ([]ledger.Receipt, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+ledger.ReceiptColumns+` FROM receipts
WHERE (?1 = '' OR state = ?1) AND (?2 = '' OR iso_week = ?2) AND key > ?3
ORDER BY key LIMIT ?4`, string(f.State), f.WeekString(), string(f.After), f.PageSize())
	if err != nil {
		return nil, fmt.Errorf("list receipts: %w", err)
	}
	defer rows.Close()
	var list []ledger.Receipt
	for rows.Next() {
		r, err := scanSQLiteReceipt(rows)
		if err != nil {
			return nil, fmt.Errorf("list receipts: %w", err)
		}
		list = append(list, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list receipts: %w", err)
	}
	return list, nil
}

// Show returns one receipt and its history.
func (s *Store) Show(ctx context.Context, key digest.Key) (ledger.Receipt, []ledger.Event, error) {
	r, err := scanSQLiteReceipt(s.db.QueryRowContext(ctx, `SELECT `+ledger.ReceiptColumns+` FROM receipts WHERE key = ?`, string(key)))
	if errors.Is(err, sql.ErrNoRows) {
		return ledger.Receipt{}, nil, fmt.Errorf("show %s: %w", key, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Receipt{}, nil, fmt.Errorf("show %s: %w", key, err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, key, at, coalesce(from_state, ''), to_state, run_id, detail
FROM receipt_events WHERE key = ? ORDER BY id`, string(key))
	if err != nil {
		return ledger.Receipt{}, nil, fmt.Errorf("show %s: events: %w", key, err)
	}
	defer rows.Close()
	var events []ledger.Event
	for rows.Next() {
		var (
			e           ledger.Event
			k, from, to string
			at          sql.NullInt64
		)
		if err := rows.Scan(&e.ID, &k, &at, &from, &to, &e.RunID, &e.Detail); err != nil {
			return ledger.Receipt{}, nil, fmt.Errorf("show %s: events: %w", key, err)
		}
		e.Key, e.At, e.From, e.To = digest.Key(k), fromUs(at), digest.State(from), digest.State(to)
		events = append(events, e)
	}
	if err := rows.Err(); err != nil {
		return ledger.Receipt{}, nil, fmt.Errorf("show %s: events: %w", key, err)
	}
	return r, events, nil
}

// Release makes a held receipt retryable and due now; see the package doc
// for quarantined receipts.
func (s *Store) Release(ctx context.Context, key digest.Key, by ledger.Action) error {
	return s.operate(ctx, key, "release", func(tx sqliteTx, r ledger.Receipt, now time.Time) error {
		fromQuarantine, detail, err := ledger.DecideRelease(r, by)
		if err != nil {
			return err
		}
		stmt := `UPDATE receipts SET previous_state = state, state = 'retryable',
    next_attempt_at = ?2, maybe_sent = 0, send_started = 0, updated_at = ?2 WHERE key = ?1`
		if fromQuarantine {
			stmt = `UPDATE receipts SET previous_state = state, state = 'retryable',
    fingerprint = coalesce(conflict_fingerprint, fingerprint), conflict_fingerprint = NULL,
    maybe_sent = maybe_sent OR send_started, send_started = 0,
    next_attempt_at = ?2, updated_at = ?2 WHERE key = ?1`
		}
		if _, err := tx.ExecContext(ctx, stmt, string(key), now.UnixMicro()); err != nil {
			return err
		}
		return sqliteEvent(ctx, tx, key, now, r.State, digest.StateRetryable, "", detail)
	})
}

// MarkSent records that a held receipt was sent, as providerRef.
func (s *Store) MarkSent(ctx context.Context, key digest.Key, providerRef string, by ledger.Action) error {
	return s.operate(ctx, key, "mark sent", func(tx sqliteTx, r ledger.Receipt, now time.Time) error {
		if r.State != digest.StateHeld {
			return fmt.Errorf("%w: %s", ledger.ErrWrongState, r.State)
		}
		_, err := tx.ExecContext(ctx, `UPDATE receipts SET previous_state = state, state = 'sent',
    sent_at = ?2, provider_ref = ?3, updated_at = ?2 WHERE key = ?1`, string(key), now.UnixMicro(), providerRef)
		if err != nil {
			return err
		}
		return sqliteEvent(ctx, tx, key, now, r.State, digest.StateSent, "", by.Detail("marked sent as "+providerRef))
	})
}

// operate runs fn on the receipt inside one write transaction.
func (s *Store) operate(ctx context.Context, key digest.Key, what string, fn func(sqliteTx, ledger.Receipt, time.Time) error) error {
	now := s.nowUTC()
	err := s.write(ctx, func(tx sqliteTx) error {
		r, err := scanSQLiteReceipt(tx.QueryRowContext(ctx, `SELECT `+ledger.ReceiptColumns+` FROM receipts WHERE key = ?`, string(key)))
		if errors.Is(err, sql.ErrNoRows) {
			return ledger.ErrNotFound
		}
		if err != nil {
			return err
		}
		return fn(tx, r, now)
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, key, err)
	}
	return nil
}

// ledger.Counts counts a week's receipts by state.
func (s *Store) Counts(ctx context.Context, week digest.ISOWeek) (ledger.Counts, error) {
	now := s.nowUTC()
	rows, err := s.db.QueryContext(ctx, `SELECT state, count(*),
    min(CASE WHEN state = 'claimed' THEN last_attempt_at END), min(CASE WHEN state = 'retryable' THEN updated_at END)
FROM receipts WHERE iso_week = ? GROUP BY state`, week.String())
	if err != nil {
		return ledger.Counts{}, fmt.Errorf("counts %s: %w", week, err)
	}
	defer rows.Close()
	c := ledger.Counts{ByState: map[digest.State]int64{}}
	for rows.Next() {
		var (
			state            string
			n                int64
			claimed, retried sql.NullInt64
		)
		if err := rows.Scan(&state, &n, &claimed, &retried); err != nil {
			return ledger.Counts{}, fmt.Errorf("counts %s: %w", week, err)
		}
		c.ByState[digest.State(state)] = n
		if claimed.Valid {
			c.OldestClaimed = now.Sub(fromUs(claimed))
		}
		if retried.Valid {
			c.OldestRetryable = now.Sub(fromUs(retried))
		}
	}
	if err := rows.Err(); err != nil {
		return ledger.Counts{}, fmt.Errorf("counts %s: %w", week, err)
	}
	return c, nil
}

func stringArgs(ss []string) []any {
	args := make([]any, len(ss))
	for i, s := range ss {
		args[i] = s
	}
	return args
}

// Repeats buckets the gaps between consecutive observations of each key.
// A zero week covers every week.
func (s *Store) Repeats(ctx context.Context, week digest.ISOWeek, horizon time.Duration) (ledger.RepeatReport, error) {
	const (
		fiveMin = int64(5 * time.Minute / time.Microsecond)
		day     = int64(24 * time.Hour / time.Microsecond)
	)
	w := ""
	if !week.IsZero() {
		w = week.String()
	}
	var r ledger.RepeatReport
	err := s.db.QueryRowContext(ctx, `
WITH o AS (
    SELECT key, at - lag(at) OVER (PARTITION BY key ORDER BY at, id) AS gap
    FROM observations WHERE ?1 = '' OR iso_week = ?1
)
SELECT count(*), count(DISTINCT key),
    coalesce(sum(gap < ?2), 0), coalesce(sum(gap >= ?2 AND gap < ?3), 0),
    coalesce(sum(gap >= ?3 AND gap <= ?4), 0), coalesce(sum(gap > ?4), 0)
FROM o`, w, fiveMin, day, horizon.Microseconds()).Scan(&r.Observations, &r.Keys, &r.UnderFiveMin, &r.SameDay, &r.Later, &r.BeyondHorizon)
	if err != nil {
		return ledger.RepeatReport{}, fmt.Errorf("repeats: %w", err)
	}
	return r, nil
}
