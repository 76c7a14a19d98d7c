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

// nullString is s, or NULL for "".
func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// RecordProviderEvent stores e and acts on it in one write transaction.
func (s *Store) RecordProviderEvent(ctx context.Context, e ledger.ProviderEvent, p ledger.EventPolicy) (out ledger.EventOutcome, err error) {
	defer classify(&err)
	if err := e.Validate(); err != nil {
		return out, err
	}
	now := s.nowUTC()
	at := now.UnixMicro()
	occurred := e.Occurred.UTC().Truncate(time.Microsecond)
	err = s.write(ctx, func(tx sqliteTx) error {
		out = ledger.EventOutcome{}
		res, err := tx.ExecContext(ctx, insertProviderEventSQL, e.Provider, e.ID, string(e.Kind), nullString(string(e.Key)),
			nullString(string(e.AddressKey())), e.Detail, occurred.UnixMicro(), e.Counted(now).UnixMicro(), at)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			out.Replay = err == nil
			return err
		}
		if e.Key != "" && e.Kind.NotesReceipt() {
			res, err := tx.ExecContext(ctx, noteReceiptSQL, string(e.Key), at, rules.ProviderNote(e))
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			out.Noted = n > 0
		}
		if len(e.AddressKeys) == 0 {
			return nil
		}
		reason, suppress := e.Kind.SuppressionReason()
		if e.Kind == ledger.EventSoftBounce {
			if _, err := tx.ExecContext(ctx, countSoftBounceSQL, string(e.AddressKey()), digest.WeekOf(occurred, time.UTC).String(), occurred.UnixMicro()); err != nil {
				return err
			}
			weeks := p.Weeks(occurred)
			wj, err := json.Marshal(weeks)
			if err != nil {
				return err
			}
			rows, err := tx.QueryContext(ctx, softBounceWeeksSQL, jsonSuppressionKeys(e.AddressKeys), string(wj))
			if err != nil {
				return err
			}
			var bounced []string
			for rows.Next() {
				var w string
				if err := rows.Scan(&w); err != nil {
					rows.Close()
					return err
				}
				bounced = append(bounced, w)
			}
			if err := errors.Join(rows.Close(), rows.Err()); err != nil {
				return err
			}
			out.SoftBounceWeeks = rules.Streak(weeks, bounced)
			reason, suppress = digest.ReasonSoftBounce, out.SoftBounceWeeks >= len(weeks)
		}
		if !suppress {
			return nil
		}
		added, err := suppressTx(ctx, tx, ledger.Suppression{Keys: e.AddressKeys, Subject: digest.SubjectAddress, Reason: reason, Source: e.Provider}, at)
		if added {
			out.Suppressed, out.Reason = true, reason
		}
		return err
	})
	if err != nil {
		return ledger.EventOutcome{}, fmt.Errorf("record %s event %s: %w", e.Provider, e.ID, err)
	}
	return out, nil
}

// EventEvidence returns key's events at provider, the provider's
// watermark inputs and the receipt's send time. The watermark is read
// before the events: an event that moved it is then among those read.
func (s *Store) EventEvidence(ctx context.Context, provider string, key digest.Key) (ev ledger.Evidence, err error) {
	defer classify(&err)
	ev = ledger.Evidence{Watermark: ledger.Watermark{Provider: provider}}
	var newest, until sql.NullInt64
	if err := s.db.QueryRowContext(ctx, providerWatermarkSQL, provider).Scan(&newest, &until); err != nil {
		return ledger.Evidence{}, fmt.Errorf("events of %s at %s: %w", key, provider, err)
	}
	ev.Watermark.Newest, ev.Watermark.Until = fromMicros(newest), fromMicros(until)
	ev.Events, err = queryAll(ctx, s.db, func(r rowScanner) (ledger.ProviderEvent, error) {
		var (
			e                  ledger.ProviderEvent
			key, addr          string
			occurred, received sql.NullInt64
		)
		if err := r.Scan(&e.Provider, &e.ID, &e.Kind, &key, &addr, &e.Detail, &occurred, &received); err != nil {
			return e, err
		}
		e.Key, e.Occurred, e.Received = digest.Key(key), fromMicros(occurred), fromMicros(received)
		if addr != "" {
			e.AddressKeys = []digest.SuppressionKey{digest.SuppressionKey(addr)}
		}
		return e, nil
	}, keyEventsSQL, provider, string(key))
	if err != nil {
		return ledger.Evidence{}, fmt.Errorf("events of %s at %s: %w", key, provider, err)
	}
	var sendAt sql.NullInt64
	switch err := s.db.QueryRowContext(ctx, sendTimeSQL, string(key)).Scan(&sendAt); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return ledger.Evidence{}, fmt.Errorf("events of %s at %s: %w", key, provider, err)
	default:
		ev.Receipt, ev.SendAt = true, fromMicros(sendAt)
	}
	return ev, nil
}

// AdvanceWatermark moves provider's operator watermark forward to until.
func (s *Store) AdvanceWatermark(ctx context.Context, provider string, until time.Time, by ledger.Action) (_ time.Time, err error) {
	defer classify(&err)
	if err := rules.ValidateAdvance(provider, until, by, s.nowUTC()); err != nil {
		return time.Time{}, err
	}
	var now sql.NullInt64
	err = s.write(ctx, func(tx sqliteTx) error {
		if _, err := tx.ExecContext(ctx, advanceWatermarkSQL, provider, until.UTC().Truncate(time.Microsecond).UnixMicro(),
			by.By, by.Reason, s.nowUTC().UnixMicro()); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, watermarkUntilSQL, provider).Scan(&now)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("advance the watermark of %s: %w", provider, err)
	}
	return fromMicros(now), nil
}

// Watermarks returns every provider's watermark inputs.
func (s *Store) Watermarks(ctx context.Context) (_ []ledger.Watermark, err error) {
	defer classify(&err)
	list, err := queryAll(ctx, s.db, func(r rowScanner) (ledger.Watermark, error) {
		var (
			w             ledger.Watermark
			newest, until sql.NullInt64
		)
		err := r.Scan(&w.Provider, &newest, &until, &w.Events)
		w.Newest, w.Until = fromMicros(newest), fromMicros(until)
		return w, err
	}, watermarksSQL)
	if err != nil {
		return nil, fmt.Errorf("watermarks: %w", err)
	}
	return list, nil
}
