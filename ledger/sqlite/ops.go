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

// The operator statements, in sql/ops.sql.
var (
	listReceiptsSQL       = queries.Get("ListReceipts")
	showReceiptSQL        = queries.Get("ShowReceipt")
	showEventsSQL         = queries.Get("ShowEvents")
	releaseHeldSQL        = queries.Get("ReleaseHeld")
	releaseQuarantinedSQL = queries.Get("ReleaseQuarantined")
	markSentSQL           = queries.Get("MarkSent")
	acknowledgeSQL        = queries.Get("Acknowledge")
	countByStateSQL       = queries.Get("CountByState")
	weekUnfinishedSQL     = queries.Get("WeekUnfinished")
	repeatsSQL            = queries.Get("Repeats")
)

// scanSQLiteReceipt scans the columns of ListReceipts.
func scanSQLiteReceipt(row rowScanner) (ledger.Receipt, error) {
	var (
		r                                  ledger.Receipt
		key, state                         string
		lease, started, next, sent         sql.NullInt64
		firstClaimed, lastAttempt, updated sql.NullInt64
	)
	err := row.Scan(&key, &r.KeyID, &state, &r.Fingerprint, &r.ConflictFingerprint, &r.Attempts,
		&r.Token, &lease, &r.SendStarted, &started, &r.MaybeSent, &next,
		&firstClaimed, &lastAttempt, &sent, &r.ProviderRef, &r.LastError,
		&r.RunID, &r.Week, &updated, &r.FirstRunID, &r.AddressKey, &r.Type, &r.Version)
	if err != nil {
		return ledger.Receipt{}, err
	}
	r.Key, r.State = digest.Key(key), digest.State(state)
	r.LeaseExpires, r.SendStartedAt, r.NextAttempt, r.SentAt = fromMicros(lease), fromMicros(started), fromMicros(next), fromMicros(sent)
	r.FirstClaimed, r.LastAttempt, r.UpdatedAt = fromMicros(firstClaimed), fromMicros(lastAttempt), fromMicros(updated)
	return r, nil
}

// List returns receipts matching f, ordered by key.
func (s *Store) List(ctx context.Context, f ledger.ListFilter) (_ []ledger.Receipt, err error) {
	defer classify(&err)
	list, err := queryAll(ctx, s.db, scanSQLiteReceipt, listReceiptsSQL, string(f.State), f.WeekString(), string(f.After), f.PageSize())
	if err != nil {
		return nil, fmt.Errorf("list receipts: %w", err)
	}
	return list, nil
}

// Show returns one receipt and its history.
func (s *Store) Show(ctx context.Context, key digest.Key) (_ ledger.Receipt, _ []ledger.Event, err error) {
	defer classify(&err)
	r, err := scanSQLiteReceipt(s.db.QueryRowContext(ctx, showReceiptSQL, string(key)))
	if errors.Is(err, sql.ErrNoRows) {
		return ledger.Receipt{}, nil, fmt.Errorf("show %s: %w", key, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Receipt{}, nil, fmt.Errorf("show %s: %w", key, err)
	}
	events, err := queryAll(ctx, s.db, scanSQLiteEvent, showEventsSQL, string(key))
	if err != nil {
		return ledger.Receipt{}, nil, fmt.Errorf("show %s: events: %w", key, err)
	}
	return r, ledger.ReceiptStory(r, events), nil
}

func scanSQLiteEvent(row rowScanner) (ledger.Event, error) {
	var (
		e           ledger.Event
		k, from, to string
		at          sql.NullInt64
	)
	if err := row.Scan(&e.ID, &k, &at, &from, &to, &e.RunID, &e.Detail); err != nil {
		return ledger.Event{}, err
	}
	e.Key, e.At, e.From, e.To = digest.Key(k), fromMicros(at), digest.State(from), digest.State(to)
	return e, nil
}

// Release makes a held receipt retryable and due now; see the package doc
// for quarantined receipts.
func (s *Store) Release(ctx context.Context, key digest.Key, by ledger.Action) (err error) {
	defer classify(&err)
	return s.operate(ctx, key, "release", func(tx sqliteTx, r ledger.Receipt, now time.Time) error {
		fromQuarantine, detail, err := ledger.DecideRelease(r, by)
		if err != nil {
			return err
		}
		stmt := releaseHeldSQL
		if fromQuarantine {
			stmt = releaseQuarantinedSQL
		}
		if _, err := tx.ExecContext(ctx, stmt, string(key), now.UnixMicro()); err != nil {
			return err
		}
		return sqliteEvent(ctx, tx, key, now, r.State, digest.StateRetryable, "", detail)
	})
}

// MarkSent records that a held receipt was sent, as providerRef.
func (s *Store) MarkSent(ctx context.Context, key digest.Key, providerRef string, by ledger.Action) (err error) {
	defer classify(&err)
	return s.operate(ctx, key, "mark sent", func(tx sqliteTx, r ledger.Receipt, now time.Time) error {
		if r.State != digest.StateHeld {
			return fmt.Errorf("%w: %s", ledger.ErrWrongState, r.State)
		}
		_, err := tx.ExecContext(ctx, markSentSQL, string(key), now.UnixMicro(), providerRef)
		if err != nil {
			return err
		}
		return sqliteEvent(ctx, tx, key, now, r.State, digest.StateSent, "", ledger.MarkSentDetail(by, providerRef))
	})
}

// Acknowledge closes a quarantined receipt that was sent, or, with
// unsent, a quarantined or held one not known to be sent.
func (s *Store) Acknowledge(ctx context.Context, key digest.Key, unsent bool, by ledger.Action) (err error) {
	defer classify(&err)
	return s.operate(ctx, key, "acknowledge", func(tx sqliteTx, r ledger.Receipt, now time.Time) error {
		detail, err := ledger.DecideAcknowledge(r, unsent, by)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, acknowledgeSQL, string(key), now.UnixMicro()); err != nil {
			return err
		}
		return sqliteEvent(ctx, tx, key, now, r.State, digest.StateAcknowledged, "", detail)
	})
}

// operate runs fn on the receipt inside one write transaction, at the
// ledger's time: a released receipt is due by the clock that decides
// retries (see ledger.CallTimes).
func (s *Store) operate(ctx context.Context, key digest.Key, what string, fn func(sqliteTx, ledger.Receipt, time.Time) error) error {
	err := s.writeAt(ctx, func(tx sqliteTx, now time.Time) error {
		r, err := scanSQLiteReceipt(tx.QueryRowContext(ctx, showReceiptSQL, string(key)))
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

// WeekUnfinished returns how many of week's receipts are claimed or
// retryable (digest.WeekReceipts).
func (s *Store) WeekUnfinished(ctx context.Context, week digest.ISOWeek) (_ int64, err error) {
	defer classify(&err)
	var n int64
	if err := s.db.QueryRowContext(ctx, weekUnfinishedSQL, week.String()).Scan(&n); err != nil {
		return 0, fmt.Errorf("unfinished receipts of %s: %w", week, err)
	}
	return n, nil
}

// Counts counts a week's receipts by state.
func (s *Store) Counts(ctx context.Context, week digest.ISOWeek) (_ ledger.Counts, err error) {
	defer classify(&err)
	now := s.nowUTC()
	rows, err := s.db.QueryContext(ctx, countByStateSQL, week.String())
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
			c.OldestClaimed = now.Sub(fromMicros(claimed))
		}
		if retried.Valid {
			c.OldestRetryable = now.Sub(fromMicros(retried))
		}
	}
	if err := rows.Err(); err != nil {
		return ledger.Counts{}, fmt.Errorf("counts %s: %w", week, err)
	}
	return c, nil
}

// Repeats buckets the gaps between consecutive observations of each key.
// A zero week covers every week.
func (s *Store) Repeats(ctx context.Context, week digest.ISOWeek, horizon time.Duration) (_ ledger.RepeatReport, err error) {
	defer classify(&err)
	const (
		fiveMin = int64(5 * time.Minute / time.Microsecond)
		day     = int64(24 * time.Hour / time.Microsecond)
	)
	w := ""
	if !week.IsZero() {
		w = week.String()
	}
	var r ledger.RepeatReport
	err = s.db.QueryRowContext(ctx, repeatsSQL, w, fiveMin, day, horizon.Microseconds()).Scan(&r.Observations, &r.Keys, &r.UnderFiveMin, &r.SameDay, &r.Later, &r.BeyondHorizon)
	if err != nil {
		return ledger.RepeatReport{}, fmt.Errorf("repeats: %w", err)
	}
	return r, nil
}
