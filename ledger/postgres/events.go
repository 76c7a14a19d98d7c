package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/internal/rules"
)

// The provider events' statements, in sql/events.sql.
var (
	insertProviderEventSQL = queries.Get("InsertProviderEvent")
	noteReceiptSQL         = queries.Get("NoteReceipt")
	countSoftBounceSQL     = queries.Get("CountSoftBounce")
	softBounceWeeksSQL     = queries.Get("SoftBounceWeeks")
	keyEventsSQL           = queries.Get("KeyEvents")
	providerWatermarkSQL   = queries.Get("ProviderWatermark")
	sendTimeSQL            = queries.Get("SendTime")
	advanceWatermarkSQL    = queries.Get("AdvanceWatermark")
	watermarkUntilSQL      = queries.Get("WatermarkUntil")
	watermarksSQL          = queries.Get("Watermarks")
)

var _ ledger.ProviderEvents = (*Store)(nil)

// nullable is s, or NULL for "".
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// RecordProviderEvent stores e and acts on it in one transaction. An
// event that only proves a message reached the provider (accepted,
// delivered) is one statement.
func (s *Store) RecordProviderEvent(ctx context.Context, e ledger.ProviderEvent, p ledger.EventPolicy) (out ledger.EventOutcome, err error) {
	defer classify(&err)
	if err := e.Validate(); err != nil {
		return out, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	occurred := e.Occurred.UTC().Truncate(time.Microsecond)
	insert := func(q pgx.Tx) (bool, error) {
		var one int
		err := q.QueryRow(ctx, insertProviderEventSQL, e.Provider, e.ID, string(e.Kind), nullable(string(e.Key)),
			nullable(string(e.AddressKey())), e.Detail, occurred, e.Counted(now).UTC().Truncate(time.Microsecond), now).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out = ledger.EventOutcome{}
		added, err := insert(tx)
		if err != nil || !added {
			out.Replay = err == nil
			return err
		}
		if e.Key != "" && e.Kind.NotesReceipt() {
			rows, err := tx.Query(ctx, noteReceiptSQL, string(e.Key), now, rules.ProviderNote(e))
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return err
			}
			out.Noted = len(ids) > 0
		}
		if len(e.AddressKeys) == 0 {
			return nil
		}
		reason, suppress := e.Kind.SuppressionReason()
		if e.Kind == ledger.EventSoftBounce {
			if _, err := tx.Exec(ctx, countSoftBounceSQL, string(e.AddressKey()), digest.WeekOf(occurred, time.UTC).String(), occurred); err != nil {
				return err
			}
			weeks := p.Weeks(occurred)
			rows, err := tx.Query(ctx, softBounceWeeksSQL, rules.KeyStrings(e.AddressKeys), weeks)
			if err != nil {
				return err
			}
			bounced, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			out.SoftBounceWeeks = rules.Streak(weeks, bounced)
			reason, suppress = digest.ReasonSoftBounce, out.SoftBounceWeeks >= len(weeks)
		}
		if !suppress {
			return nil
		}
		var id int64
		err = tx.QueryRow(ctx, suppressSQL, rules.KeyStrings(e.AddressKeys), string(digest.SubjectAddress),
			string(reason), e.Provider, "", now).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // suppressed already
		}
		out.Suppressed, out.Reason = err == nil, reason
		return err
	})
	if err != nil {
		return ledger.EventOutcome{}, fmt.Errorf("record %s event %s: %w", e.Provider, e.ID, err)
	}
	if !out.Suppressed {
		out.Reason = ""
	}
	return out, nil
}

// EventEvidence returns key's events at provider, the provider's
// watermark inputs and the receipt's send time, in one transaction so the
// three agree.
func (s *Store) EventEvidence(ctx context.Context, provider string, key digest.Key) (ev ledger.Evidence, err error) {
	defer classify(&err)
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		ev = ledger.Evidence{Watermark: ledger.Watermark{Provider: provider}}
		rows, err := tx.Query(ctx, keyEventsSQL, provider, string(key))
		if err != nil {
			return err
		}
		if ev.Events, err = pgx.CollectRows(rows, scanProviderEvent); err != nil {
			return err
		}
		var newest, until *time.Time
		if err := tx.QueryRow(ctx, providerWatermarkSQL, provider).Scan(&newest, &until); err != nil {
			return err
		}
		ev.Watermark.Newest, ev.Watermark.Until = utcOrZero(newest), utcOrZero(until)
		var sendAt time.Time
		switch err := tx.QueryRow(ctx, sendTimeSQL, string(key)).Scan(&sendAt); {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		default:
			ev.Receipt, ev.SendAt = true, sendAt.UTC()
		}
		return nil
	})
	if err != nil {
		return ledger.Evidence{}, fmt.Errorf("events of %s at %s: %w", key, provider, err)
	}
	return ev, nil
}

func scanProviderEvent(row pgx.CollectableRow) (ledger.ProviderEvent, error) {
	var (
		e               ledger.ProviderEvent
		kind, key, addr string
	)
	if err := row.Scan(&e.Provider, &e.ID, &kind, &key, &addr, &e.Detail, &e.Occurred, &e.Received); err != nil {
		return e, err
	}
	e.Kind, e.Key, e.Occurred, e.Received = ledger.EventKind(kind), digest.Key(key), e.Occurred.UTC(), e.Received.UTC()
	if addr != "" {
		e.AddressKeys = []digest.SuppressionKey{digest.SuppressionKey(addr)}
	}
	return e, nil
}

func utcOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// AdvanceWatermark moves provider's operator watermark forward to until.
func (s *Store) AdvanceWatermark(ctx context.Context, provider string, until time.Time, by ledger.Action) (_ time.Time, err error) {
	defer classify(&err)
	if err := rules.ValidateAdvance(provider, until, by, s.now()); err != nil {
		return time.Time{}, err
	}
	var now time.Time
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, advanceWatermarkSQL, provider, until.UTC().Truncate(time.Microsecond), by.By, by.Reason,
			s.now().UTC().Truncate(time.Microsecond)); err != nil {
			return err
		}
		return tx.QueryRow(ctx, watermarkUntilSQL, provider).Scan(&now)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("advance the watermark of %s: %w", provider, err)
	}
	return now.UTC(), nil
}

// Watermarks returns every provider's watermark inputs.
func (s *Store) Watermarks(ctx context.Context) (_ []ledger.Watermark, err error) {
	defer classify(&err)
	rows, err := s.pool.Query(ctx, watermarksSQL)
	if err != nil {
		return nil, fmt.Errorf("watermarks: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.Watermark, error) {
		var (
			w             ledger.Watermark
			newest, until *time.Time
		)
		err := row.Scan(&w.Provider, &newest, &until, &w.Events)
		w.Newest, w.Until = utcOrZero(newest), utcOrZero(until)
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("watermarks: %w", err)
	}
	return list, nil
}
