package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// The cutoffs of an event retention: each horizon before the ledger's
// clock (none without one), and the first week of the soft-bounce streak
// window of an event occurring the lag before it, which a longer lag or
// streak moves back.
func TestEventRetentionCutoffs(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, time.August, 10, 6, 0, 0, 0, time.UTC) // Monday, 2026-W33
	for _, c := range []struct {
		name   string
		r      ledger.EventRetention
		events time.Time
		counts time.Time
		streak string
	}{
		{"no horizons", ledger.EventRetention{}, time.Time{}, time.Time{}, "2026-W31"}, // the default 3 weeks
		{"horizons", ledger.EventRetention{ProviderEvents: 90 * 24 * time.Hour, SoftBounces: 14 * 24 * time.Hour},
			now.AddDate(0, 0, -90), now.AddDate(0, 0, -14), "2026-W31"},
		{"lag within the week", ledger.EventRetention{Lag: 6 * time.Hour}, time.Time{}, time.Time{}, "2026-W31"},
		{"lag into last week", ledger.EventRetention{Lag: 30 * time.Hour}, time.Time{}, time.Time{}, "2026-W30"},
		{"one-week streak", ledger.EventRetention{Policy: ledger.EventPolicy{SoftBounceWeeks: 1}}, time.Time{}, time.Time{}, "2026-W33"},
		{"across the year", ledger.EventRetention{Policy: ledger.EventPolicy{SoftBounceWeeks: 40}}, time.Time{}, time.Time{}, "2025-W46"},
	} {
		got := c.r.Cutoffs(now)
		if !got.ProviderEvents.Equal(c.events) || !got.SoftBounces.Equal(c.counts) || got.StreakWeek.String() != c.streak {
			t.Errorf("%s: %+v; want events %v, counts %v, streak from %s", c.name, got, c.events, c.counts, c.streak)
		}
	}
	if err := (ledger.PruneRequest{OlderThan: time.Hour, Events: ledger.EventRetention{Lag: -1}}).Validate(); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("a negative lag: %v; want ErrInvalid", err)
	}
}

// Receipts' oldest row is the start of their oldest week, in UTC.
func TestOldestReceipts(t *testing.T) {
	t.Parallel()
	if r, err := ledger.OldestReceipts(""); err != nil || !r.At.IsZero() || r.Table != ledger.TableReceipts {
		t.Errorf("no receipts: %+v, %v", r, err)
	}
	r, err := ledger.OldestReceipts("2026-W32")
	if err != nil || r.Week != (digest.ISOWeek{Year: 2026, Week: 32}) || !r.At.Equal(time.Date(2026, time.August, 3, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("2026-W32: %+v, %v", r, err)
	}
	if _, err := ledger.OldestReceipts("2026-32"); err == nil {
		t.Error("a malformed week: no error")
	}
}
