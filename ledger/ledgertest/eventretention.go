package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// The clocks of these tests stay behind the real one (the suite's clock
// starts in August 2026, and they move it a month at most): PostgreSQL's
// store cuts by the earlier of its server's clock and the store's own,
// and the event horizons are ages before it.

const day = 24 * time.Hour

func evidence(t *testing.T, s ledger.Store, provider string, key digest.Key) []ledger.ProviderEvent {
	t.Helper()
	ev, err := s.EventEvidence(context.Background(), provider, key)
	if err != nil {
		t.Fatal(err)
	}
	return ev.Events
}

func watermarksByProvider(t *testing.T, s ledger.Store) map[string]ledger.Watermark {
	t.Helper()
	list, err := s.Watermarks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]ledger.Watermark{}
	for _, w := range list {
		out[w.Provider] = w
	}
	return out
}

// A prune deletes the provider events received before its horizon,
// whatever they name, but the evidence: an event of a receipt the prune
// keeps (a held one, which the events look-up asks about) stays until a
// prune takes that receipt, and then goes with it; each provider's newest
// event (its watermark) stays. The horizon is by the time the ledger
// received an event, not the provider's time. A dry run counts as much
// and deletes nothing; no horizon prunes none.
func testPruneProviderEventsKeepsEvidence(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	kr := keyring(t, "k1")
	addr := kr.AddressKeys("gone@example.com")
	hold(t, s, keys(t, "held"))
	held := keys(t, "held")[0]
	gone := send(t, s, keys(t, "gone"), "ref-1").Key
	none := keys(t, "no_receipt")[0]
	at := clk.Now()
	record(t, s, providerEvent("held-1", ledger.EventDelivered, held, nil, at), ledger.EventPolicy{})
	record(t, s, providerEvent("gone-1", ledger.EventDelivered, gone, nil, at), ledger.EventPolicy{})
	record(t, s, providerEvent("addr-1", ledger.EventHardBounce, "", addr, at), ledger.EventPolicy{})
	record(t, s, providerEvent("none-1", ledger.EventDelivered, none, nil, at), ledger.EventPolicy{})
	ses := providerEvent("ses-1", ledger.EventDelivered, none, nil, at)
	ses.Provider = "ses"
	record(t, s, ses, ledger.EventPolicy{}) // ses's only event: its watermark

	horizon := 20 * day
	clk.Advance(30 * day)
	// Received now, though it occurred long ago: the horizon is the
	// ledger's time. The newest of postmark's.
	record(t, s, providerEvent("late-1", ledger.EventHardBounce, "", addr, at.Add(-60*day)), ledger.EventPolicy{})
	record(t, s, providerEvent("new-1", ledger.EventAccepted, none, nil, clk.Now()), ledger.EventPolicy{})

	cutoff := clk.Now().Add(-horizon)
	p := ledger.PruneRequest{Before: cutoff, Events: ledger.EventRetention{ProviderEvents: horizon}}
	if res := mustPrune(t, s, ledger.PruneRequest{Before: cutoff, DryRun: true}); res.ProviderEvents != 0 {
		t.Fatalf("dry run without an events horizon: %+v; want no provider event counted", res)
	}
	dry := p
	dry.DryRun = true
	if res := mustPrune(t, s, dry); res.ProviderEvents != 3 || res.Receipts != 1 {
		t.Fatalf("dry run: %+v; want 3 provider events (of the pruned receipt, of an address, of no receipt) and 1 receipt", res)
	}
	if got := evidence(t, s, "postmark", gone); len(got) != 1 {
		t.Fatalf("a dry run deleted the events of %s: %+v", gone, got)
	}

	res := mustPrune(t, s, p)
	if res.ProviderEvents != 3 || res.Receipts != 1 {
		t.Fatalf("prune: %+v; want 3 provider events and 1 receipt", res)
	}
	if got := evidence(t, s, "postmark", held); len(got) != 1 || got[0].ID != "held-1" {
		t.Fatalf("events of the held receipt: %+v; want held-1 kept for its look-up", got)
	}
	if got := evidence(t, s, "postmark", gone); len(got) != 0 {
		t.Fatalf("events of the pruned receipt: %+v; want none", got)
	}
	if got := evidence(t, s, "postmark", none); len(got) != 1 || got[0].ID != "new-1" {
		t.Fatalf("events of a key with no receipt: %+v; want only the recent new-1", got)
	}
	wms := watermarksByProvider(t, s)
	if w := wms["postmark"]; w.Events != 3 || !w.Newest.Equal(clk.Now()) {
		t.Fatalf("postmark: %+v; want held-1, late-1 and new-1 left, newest now", w)
	}
	if w := wms["ses"]; w.Events != 1 || !w.Newest.Equal(at) {
		t.Fatalf("ses: %+v; want its only event kept, the watermark where it was", w)
	}
	if res := mustPrune(t, s, p); res.ProviderEvents != 0 {
		t.Fatalf("second prune: %+v; want nothing more", res)
	}

	// The held receipt goes (named): its event goes with it, in the same
	// prune.
	p.IncludeHeld = true
	if res := mustPrune(t, s, p); res.Receipts != 1 || res.ProviderEvents != 1 {
		t.Fatalf("prune of the held receipt: %+v; want it and its event", res)
	}
	if got := evidence(t, s, "postmark", held); len(got) != 0 {
		t.Fatalf("events of the pruned held receipt: %+v; want none", got)
	}
}

// A prune deletes the soft-bounce counts whose last bounce is older than
// its horizon, but not those of the weeks a bounce still to come counts
// in its streak (the policy's weeks ending with the week of the ledger's
// clock less the lag): an address two weeks into a three-week streak is
// suppressed by its third week's bounce after the prune as before it. A
// count of an older week is gone: a late bounce no longer finds it.
func testPruneSoftBouncesKeepsStreaks(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	kr := keyring(t, "k1")
	streak, lapsed := kr.AddressKeys("streak@example.com"), kr.AddressKeys("lapsed@example.com")
	p := ledger.EventPolicy{SoftBounceWeeks: 3}
	now := clk.Now() // Monday 2026-08-10, 2026-W33
	weekAgo := func(n int) time.Time { return now.AddDate(0, 0, -7*n).Add(-time.Hour) }
	n := 0
	bounce := func(addr []digest.SuppressionKey, at time.Time) ledger.EventOutcome {
		t.Helper()
		n++
		return record(t, s, ledger.ProviderEvent{Provider: "ses", ID: fmt.Sprint("soft-", n), Kind: ledger.EventSoftBounce, AddressKeys: addr, Occurred: at}, p)
	}
	bounce(streak, weekAgo(5)) // W28: before the streak window
	bounce(streak, weekAgo(2)) // W31
	if out := bounce(streak, weekAgo(1)); out.SoftBounceWeeks != 2 || out.Suppressed {
		t.Fatalf("the streak's second week: %+v", out)
	}
	bounce(lapsed, weekAgo(4)) // W29

	r := ledger.PruneRequest{Before: now.Add(-day), Events: ledger.EventRetention{SoftBounces: day, Policy: p, Lag: time.Hour}}
	dry := r
	dry.DryRun = true
	if res := mustPrune(t, s, dry); res.SoftBounces != 2 {
		t.Fatalf("dry run: %+v; want 2 soft-bounce counts (W28, W29)", res)
	}
	if res := mustPrune(t, s, r); res.SoftBounces != 2 {
		t.Fatalf("prune: %+v; want 2 soft-bounce counts", res)
	}
	if res := mustPrune(t, s, r); res.SoftBounces != 0 {
		t.Fatalf("second prune: %+v; want none left to prune", res)
	}
	rows, err := s.OldestRows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := rows[3]; got.Table != ledger.TableSoftBounces || !got.At.Equal(weekAgo(2)) {
		t.Fatalf("oldest soft bounce %+v; want the streak's first week, %v", got, weekAgo(2))
	}
	if out := bounce(streak, now); out.SoftBounceWeeks != 3 || !out.Suppressed || out.Reason != digest.ReasonSoftBounce {
		t.Fatalf("the streak's third week after the prune: %+v; want suppressed", out)
	}
	// Late bounces of the weeks after the pruned ones: one week each.
	if out := bounce(lapsed, weekAgo(3)); out.SoftBounceWeeks != 1 {
		t.Fatalf("a late bounce of W30: %+v; want a streak of 1 (W29's count pruned)", out)
	}
	if out := bounce(streak, weekAgo(4)); out.SoftBounceWeeks != 1 {
		t.Fatalf("a late bounce of W29: %+v; want a streak of 1 (W28's count pruned)", out)
	}
}

// OldestRows reports each kept table's oldest row, in KeptTables' order:
// none on an empty ledger; the start of the oldest week holding receipts,
// the earliest observation, provider event received and soft bounce; and
// what a prune leaves.
func testOldestRows(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	oldest := func() []ledger.OldestRow {
		t.Helper()
		rows, err := s.OldestRows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != len(ledger.KeptTables) {
			t.Fatalf("oldest rows %+v; want one per kept table", rows)
		}
		for i, r := range rows {
			if r.Table != ledger.KeptTables[i] {
				t.Fatalf("oldest rows %+v; want the order of %v", rows, ledger.KeptTables)
			}
		}
		return rows
	}
	for _, r := range oldest() {
		if !r.At.IsZero() || !r.Week.IsZero() {
			t.Fatalf("empty ledger: %+v; want no oldest row", r)
		}
	}

	t0 := clk.Now()
	send(t, s, keys(t, "a"), "ref-1")
	if _, err := s.Observe(ctx, []digest.Observation{{Keys: keys(t, "b"), Fingerprint: "fp1", Week: week, RunID: "observe"}}); err != nil {
		t.Fatal(err)
	}
	record(t, s, providerEvent("d1", ledger.EventDelivered, keys(t, "a")[0], nil, t0), ledger.EventPolicy{})
	bounced := t0.Add(-3 * day)
	record(t, s, ledger.ProviderEvent{Provider: "ses", ID: "s1", Kind: ledger.EventSoftBounce,
		AddressKeys: keyring(t, "k1").AddressKeys("soft@example.com"), Occurred: bounced}, ledger.EventPolicy{})
	clk.Advance(time.Hour)
	next := week.Next()
	r := req(keyring(t, "k1").Candidates(digest.Identity{Customer: "c", Week: next, Type: "weekly_activity", Version: "v3"}), "fp1")
	r.Week = next
	c := mustClaim(t, s, r)
	if err := finish1(t, s, digest.Finish{Key: c.Key, Token: c.Token, Week: next, State: digest.StateSent}); err != nil {
		t.Fatal(err)
	}

	rows := oldest()
	want := []ledger.OldestRow{
		{Table: ledger.TableReceipts, At: week.Start(time.UTC), Week: week},
		{Table: ledger.TableObservations, At: t0},
		{Table: ledger.TableProviderEvents, At: t0},
		{Table: ledger.TableSoftBounces, At: bounced},
	}
	for i := range want {
		if rows[i].Table != want[i].Table || !rows[i].At.Equal(want[i].At) || rows[i].Week != want[i].Week {
			t.Errorf("oldest %s: %+v; want %+v", want[i].Table, rows[i], want[i])
		}
	}

	// A prune between the two weeks' receipts leaves the later week.
	mustPrune(t, s, ledger.PruneRequest{Before: t0.Add(time.Minute)})
	if got := oldest()[0]; got.Week != next || !got.At.Equal(next.Start(time.UTC)) {
		t.Fatalf("oldest receipts after the prune: %+v; want %s", got, next)
	}
	if got := oldest()[1]; !got.At.IsZero() {
		t.Fatalf("oldest observation after the prune: %+v; want none", got)
	}
}

// A negative event horizon is a programming error.
func testPruneRefusesNegativeEventRetention(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	for _, e := range []ledger.EventRetention{{ProviderEvents: -time.Hour}, {SoftBounces: -time.Hour}, {Lag: -time.Hour}} {
		if _, err := s.Prune(context.Background(), ledger.PruneRequest{Before: clk.Now(), Events: e}); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("prune with %+v: %v; want ErrInvalid", e, err)
		}
	}
}
