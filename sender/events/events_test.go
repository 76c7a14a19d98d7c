package events_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/sqlite"
	"github.com/weeklydigest/digest/sender"
	"github.com/weeklydigest/digest/sender/events"
)

// The events look-up on a real (SQLite) ledger: found by any event of
// the key at its provider; not found only once the watermark (newest
// event less the lag, or the operator's) is past the send plus
// ClockMargin; otherwise a temporary error wrapping ErrNotComplete.
func TestEventsLookup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "l.db"), Now: clock, LedgerNow: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	kr, err := digest.ParseKeyring("k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	if err != nil {
		t.Fatal(err)
	}
	week := digest.ISOWeek{Year: 2026, Week: 48}
	claimStarted := func(customer string) digest.Key {
		id := digest.Identity{Customer: customer, Week: week, Type: "weekly_activity", Version: "v1"}
		res, err := store.Claim(ctx, []digest.ClaimRequest{{Keys: kr.Candidates(id), Fingerprint: "fp", Week: week, RunID: "r", Lease: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.StartSending(ctx, []digest.Fence{{Key: res[0].Key, Token: res[0].Token, Week: week}}); err != nil {
			t.Fatal(err)
		}
		return res[0].Key
	}
	delivered, silent := claimStarted("c1"), claimStarted("c2")
	record := func(id string, key digest.Key, at time.Time) {
		if _, err := store.RecordProviderEvent(ctx, ledger.ProviderEvent{Provider: "ses", ID: id, Kind: ledger.EventDelivered, Key: key, Occurred: at}, ledger.EventPolicy{}); err != nil {
			t.Fatal(err)
		}
	}
	l := events.New("ses", store, time.Hour)
	if err := sender.CheckReachable(ctx, l); err != nil {
		t.Fatalf("CheckReachable: %v", err)
	}
	notComplete := func(what string, key digest.Key) {
		t.Helper()
		_, found, err := l.Lookup(ctx, key)
		if found || !errors.Is(err, events.ErrNotComplete) || digest.SendClassOf(err) != digest.SendTemporary {
			t.Fatalf("%s: found %v, %v; want a temporary ErrNotComplete", what, found, err)
		}
	}
	notComplete("no event yet", silent)

	now = now.Add(10 * time.Minute)
	record("e1", delivered, now)
	if ref, found, err := l.Lookup(ctx, delivered); err != nil || !found || ref != "ses event e1 (delivered)" {
		t.Fatalf("Lookup(delivered) = %q, %v, %v", ref, found, err)
	}
	if _, found, err := events.New("sendgrid", store, time.Hour).Lookup(ctx, delivered); found || err == nil {
		t.Fatalf("another provider's look-up found %v, %v; want no event and an error", found, err)
	}
	notComplete("an event 10m after the send, lag 1h", silent)

	now = now.Add(2 * time.Hour)
	record("e2", delivered, now)
	if _, found, err := l.Lookup(ctx, silent); err != nil || found {
		t.Fatalf("past the watermark: found %v, %v; want not found", found, err)
	}

	// The operator's watermark: the sendgrid look-up has no events at all.
	sg := events.New("sendgrid", store, time.Hour)
	if _, err := store.AdvanceWatermark(ctx, "sendgrid", now, ledger.Action{By: "oncall", Reason: "no backlog in the console"}); err != nil {
		t.Fatal(err)
	}
	if _, found, err := sg.Lookup(ctx, silent); err != nil || found {
		t.Fatalf("past the operator's watermark: found %v, %v; want not found", found, err)
	}
	if _, _, err := sg.Lookup(ctx, kr.Key(digest.Identity{Customer: "none", Week: week, Type: "weekly_activity", Version: "v1"})); err == nil {
		t.Fatal("a key without a receipt: want an error (no send time)")
	}
	if _, _, err := events.New("ses", nil, 0).Lookup(ctx, silent); err == nil {
		t.Fatal("an unbound look-up answered")
	}
}
