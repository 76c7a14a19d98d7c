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

// The operator statements, in sql/ops.sql.
var (
	listReceiptsSQL       = queries.Get("ListReceipts")
	showReceiptSQL        = queries.Get("ShowReceipt")
	lockReceiptSQL        = queries.Get("LockReceipt")
	showEventsSQL         = queries.Get("ShowEvents")
	releaseHeldSQL        = queries.Get("ReleaseHeld")
	releaseQuarantinedSQL = queries.Get("ReleaseQuarantined")
	markSentSQL           = queries.Get("MarkSent")
	acknowledgeSQL        = queries.Get("Acknowledge")
	insertEventSQL        = queries.Get("InsertEvent")
	countByStateSQL       = queries.Get("CountByState")
	weekUnfinishedSQL     = queries.Get("WeekUnfinished")
	oldestClaimedSQL      = queries.Get("OldestClaimed")
	oldestRetryableSQL    = queries.Get("OldestRetryable")
	dropWeekCountsSQL     = queries.Get("DropWeekCounts")
	repeatsSQL            = queries.Get("Repeats")
)

// scanPgReceipt scans the columns of ListReceipts.
func scanPgReceipt(row pgx.Row) (ledger.Receipt, error) {
	var (
		r                                  ledger.Receipt
		key, state                         string
		lease, started, next, sent         *time.Time
		firstClaimed, lastAttempt, updated time.Time
	)
	err := row.Scan(&key, &r.KeyID, &state, &r.Fingerprint, &r.ConflictFingerprint, &r.Attempts,
		&r.Token, &lease, &r.SendStarted, &started, &r.MaybeSent, &next,
		&firstClaimed, &lastAttempt, &sent, &r.ProviderRef, &r.LastError,
		&r.RunID, &r.Week, &updated, &r.FirstRunID, &r.AddressKey, &r.Type, &r.Version)
	if err != nil {
		return ledger.Receipt{}, err
	}
	r.Key, r.State = digest.Key(key), digest.State(state)
	r.LeaseExpires, r.SendStartedAt, r.NextAttempt, r.SentAt = timeOrZero(lease), timeOrZero(started), timeOrZero(next), timeOrZero(sent)
	r.FirstClaimed, r.LastAttempt, r.UpdatedAt = firstClaimed.UTC(), lastAttempt.UTC(), updated.UTC()
	return r, nil
}

// List returns receipts matching f, ordered by key.
func (s *Store) List(ctx context.Context, f ledger.ListFilter) (_ []ledger.Receipt, err error) {
	defer classify(&err)
	rows, err := s.pool.Query(ctx, listReceiptsSQL, string(f.State), f.WeekString(), string(f.After), f.PageSize())
	if err != nil {
		return nil, fmt.Errorf("list receipts: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.Receipt, error) { return scanPgReceipt(row) })
	if err != nil {
		return nil, fmt.Errorf("list receipts: %w", err)
	}
	return list, nil
}

// Show returns one receipt and its history.
func (s *Store) Show(ctx context.Context, key digest.Key) (_ ledger.Receipt, _ []ledger.Event, err error) {
	defer classify(&err)
	r, err := scanPgReceipt(s.pool.QueryRow(ctx, showReceiptSQL, string(key)))
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.Receipt{}, nil, fmt.Errorf("show %s: %w", key, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Receipt{}, nil, fmt.Errorf("show %s: %w", key, err)
	}
	rows, err := s.pool.Query(ctx, showEventsSQL, string(key))
	if err != nil {
		return ledger.Receipt{}, nil, fmt.Errorf("show %s: events: %w", key, err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.Event, error) {
		var e ledger.Event
		var k, from, to string
		err := row.Scan(&e.ID, &k, &e.At, &from, &to, &e.RunID, &e.Detail)
		e.Key, e.From, e.To, e.At = digest.Key(k), digest.State(from), digest.State(to), e.At.UTC()
		return e, err
	})
	if err != nil {
		return ledger.Receipt{}, nil, fmt.Errorf("show %s: events: %w", key, err)
	}
	return r, ledger.ReceiptStory(r, events), nil
}

// Release makes a held receipt retryable and due now; see the package doc
// for quarantined receipts.
func (s *Store) Release(ctx context.Context, key digest.Key, by ledger.Action) (err error) {
	defer classify(&err)
	return s.operate(ctx, key, "release", func(tx pgx.Tx, r ledger.Receipt, now time.Time) error {
		fromQuarantine, detail, err := ledger.DecideRelease(r, by)
		if err != nil {
			return err
		}
		stmt := releaseHeldSQL
		if fromQuarantine {
			stmt = releaseQuarantinedSQL
		}
		if _, err := tx.Exec(ctx, stmt, string(key), now); err != nil {
			return err
		}
		return pgEvent(ctx, tx, key, now, r.State, digest.StateRetryable, detail)
	})
}

// MarkSent records that a held receipt was sent, as providerRef.
func (s *Store) MarkSent(ctx context.Context, key digest.Key, providerRef string, by ledger.Action) (err error) {
	defer classify(&err)
	return s.operate(ctx, key, "mark sent", func(tx pgx.Tx, r ledger.Receipt, now time.Time) error {
		if r.State != digest.StateHeld {
			return fmt.Errorf("%w: %s", ledger.ErrWrongState, r.State)
		}
		_, err := tx.Exec(ctx, markSentSQL, string(key), now, providerRef)
		if err != nil {
			return err
		}
		return pgEvent(ctx, tx, key, now, r.State, digest.StateSent, ledger.MarkSentDetail(by, providerRef))
	})
}

// Acknowledge closes a quarantined receipt that was sent, or, with
// unsent, a quarantined or held one not known to be sent.
func (s *Store) Acknowledge(ctx context.Context, key digest.Key, unsent bool, by ledger.Action) (err error) {
	defer classify(&err)
	return s.operate(ctx, key, "acknowledge", func(tx pgx.Tx, r ledger.Receipt, now time.Time) error {
		detail, err := ledger.DecideAcknowledge(r, unsent, by)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, acknowledgeSQL, string(key), now); err != nil {
			return err
		}
		return pgEvent(ctx, tx, key, now, r.State, digest.StateAcknowledged, detail)
	})
}

// operate runs fn on the locked receipt in one transaction, at the
// server's time: a released receipt is due by the clock that decides
// retries (see ledger.CallTimes), not the operator's machine's.
func (s *Store) operate(ctx context.Context, key digest.Key, what string, fn func(pgx.Tx, ledger.Receipt, time.Time) error) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var now time.Time
		if err := tx.QueryRow(ctx, ledgerTimeSQL, s.clockArg()).Scan(&now); err != nil {
			return err
		}
		now = now.UTC()
		r, err := scanPgReceipt(tx.QueryRow(ctx, lockReceiptSQL, string(key)))
		if errors.Is(err, pgx.ErrNoRows) {
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

func pgEvent(ctx context.Context, tx pgx.Tx, key digest.Key, at time.Time, from, to digest.State, detail string) error {
	_, err := tx.Exec(ctx, insertEventSQL, string(key), at, string(from), string(to), detail)
	return err
}

// WeekUnfinished returns how many of week's receipts are claimed or
// retryable (digest.WeekReceipts).
func (s *Store) WeekUnfinished(ctx context.Context, week digest.ISOWeek) (_ int64, err error) {
	defer classify(&err)
	var n int64
	if err := s.pool.QueryRow(ctx, weekUnfinishedSQL, week.String()).Scan(&n); err != nil {
		return 0, fmt.Errorf("unfinished receipts of %s: %w", week, err)
	}
	return n, nil
}

// Counts counts a week's receipts by state, from the counters the
// receipts' triggers keep in the same transaction as every change
// (migration 00011), and reads the oldest claimed and retryable receipts'
// times when there are any. The ages it reports are by the process's
// clock: a figure for status and alerts, not a decision.
func (s *Store) Counts(ctx context.Context, week digest.ISOWeek) (_ ledger.Counts, err error) {
	defer classify(&err)
	now := s.nowUTC()
	rows, err := s.pool.Query(ctx, countByStateSQL, week.String())
	if err != nil {
		return ledger.Counts{}, fmt.Errorf("counts %s: %w", week, err)
	}
	c := ledger.Counts{ByState: map[digest.State]int64{}}
	var (
		state string
		n     int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error {
		c.ByState[digest.State(state)] = n
		return nil
	}); err != nil {
		return ledger.Counts{}, fmt.Errorf("counts %s: %w", week, err)
	}
	for _, o := range []struct {
		state digest.State
		sql   string
		age   *time.Duration
	}{{digest.StateClaimed, oldestClaimedSQL, &c.OldestClaimed}, {digest.StateRetryable, oldestRetryableSQL, &c.OldestRetryable}} {
		if c.ByState[o.state] == 0 {
			continue
		}
		var at *time.Time
		if err := s.pool.QueryRow(ctx, o.sql, week.String()).Scan(&at); err != nil {
			return ledger.Counts{}, fmt.Errorf("counts %s: %w", week, err)
		}
		if at != nil {
			*o.age = now.Sub(*at)
		}
	}
	return c, nil
}

// Repeats buckets the gaps between consecutive observations of each key.
// A zero week covers every week.
func (s *Store) Repeats(ctx context.Context, week digest.ISOWeek, horizon time.Duration) (_ ledger.RepeatReport, err error) {
	defer classify(&err)
	var r ledger.RepeatReport
	w := ""
	if !week.IsZero() {
		w = week.String()
	}
	err = s.pool.QueryRow(ctx, repeatsSQL, w, horizon).Scan(&r.Observations, &r.Keys, &r.UnderFiveMin, &r.SameDay, &r.Later, &r.BeyondHorizon)
	if err != nil {
		return ledger.RepeatReport{}, fmt.Errorf("repeats: %w", err)
	}
	return r, nil
}
