package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// providerEvent returns an event of kind for key and address at t.
func providerEvent(id string, kind ledger.EventKind, key digest.Key, addr []digest.SuppressionKey, t time.Time) ledger.ProviderEvent {
	return ledger.ProviderEvent{Provider: "postmark", ID: id, Kind: kind, Key: key, AddressKeys: addr, Occurred: t, Detail: "5.1.1"}
}

func record(t testing.TB, s ledger.Store, e ledger.ProviderEvent, p ledger.EventPolicy) ledger.EventOutcome {
	t.Helper()
	out, err := s.RecordProviderEvent(context.Background(), e, p)
	if err != nil {
		t.Fatalf("record %s %s: %v", e.Kind, e.ID, err)
	}
	return out
}

// testProviderEventsRecordedOnce: an event is stored once (a replay
// changes nothing and says so); a hard bounce suppresses the address and
// notes the receipt's history without changing its state or what Show
// tells of its happy path; a complaint on an address suppressed already
// adds nothing; the provider's unsubscribe suppresses; nothing is stored
// in clear.
func testProviderEventsRecordedOnce(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	kr := keyring(t, "k1")
	k := keys(t, "cust_events")
	c := send(t, s, k, "<m1@example.net>")
	addr := kr.AddressKeys("Bounce@Example.com")
	at := clk.Now().Add(time.Minute)
	clk.Advance(2 * time.Minute)

	if out := record(t, s, providerEvent("d1", ledger.EventDelivered, c.Key, addr, at), ledger.EventPolicy{}); out != (ledger.EventOutcome{}) {
		t.Fatalf("delivered: %+v; want stored, nothing else", out)
	}
	if out := record(t, s, providerEvent("d1", ledger.EventDelivered, c.Key, addr, at), ledger.EventPolicy{}); !out.Replay {
		t.Fatalf("the same event again: %+v; want a replay", out)
	}
	if got, _ := s.Suppressed(ctx, addr); len(got) != 0 {
		t.Fatalf("a delivery suppressed the address: %v", got)
	}
	out := record(t, s, providerEvent("b1", ledger.EventHardBounce, c.Key, addr, at.Add(time.Second)), ledger.EventPolicy{})
	if !out.Suppressed || out.Reason != digest.ReasonHardBounce || !out.Noted || out.Replay {
		t.Fatalf("hard bounce: %+v; want the address suppressed and the receipt noted", out)
	}
	if out := record(t, s, providerEvent("b1", ledger.EventHardBounce, c.Key, addr, at.Add(time.Second)), ledger.EventPolicy{}); !out.Replay || out.Suppressed || out.Noted {
		t.Fatalf("the bounce replayed: %+v; want a replay that does nothing", out)
	}
	if out := record(t, s, providerEvent("c1", ledger.EventComplaint, c.Key, addr, at.Add(2*time.Second)), ledger.EventPolicy{}); out.Suppressed || !out.Noted {
		t.Fatalf("complaint on a suppressed address: %+v; want noted, no second suppression", out)
	}
	list, err := s.ListSuppressions(ctx, ledger.SuppressionFilter{Keys: addr})
	if err != nil || len(list) != 1 || list[0].Subject != digest.SubjectAddress || list[0].Reason != digest.ReasonHardBounce || list[0].Source != "postmark" {
		t.Fatalf("suppressions of the address: %+v, %v; want one hard_bounce from postmark", list, err)
	}
	r, hist := show(t, s, c.Key)
	if r.State != digest.StateSent {
		t.Fatalf("receipt state %s after a bounce; want sent (a note changes no state)", r.State)
	}
	var notes, sentTold int
	for _, e := range hist {
		if ledger.IsProviderNote(e) {
			notes++
			if e.From != digest.StateSent || !strings.Contains(e.Detail, "postmark reported") || e.FromReceipt {
				t.Errorf("note %+v", e)
			}
		}
		if e.To == digest.StateSent && e.FromReceipt {
			sentTold++
		}
	}
	if notes != 2 || sentTold != 1 {
		t.Fatalf("history %+v: %d notes (want 2: the bounce and the complaint) and %d told sends (want 1)", hist, notes, sentTold)
	}

	other := kr.AddressKeys("unsub@example.com")
	if out := record(t, s, providerEvent("u1", ledger.EventUnsubscribe, "", other, at), ledger.EventPolicy{}); !out.Suppressed || out.Reason != digest.ReasonUnsubscribe || out.Noted {
		t.Fatalf("provider unsubscribe without a key: %+v; want the address suppressed", out)
	}
	// A bounce for a key with no receipt (pruned, or another sender's):
	// stored and acted on, nothing noted.
	if out := record(t, s, providerEvent("b2", ledger.EventHardBounce, keys(t, "cust_none")[0], kr.AddressKeys("x@example.com"), at), ledger.EventPolicy{}); out.Noted || !out.Suppressed {
		t.Fatalf("bounce without a receipt: %+v", out)
	}
	ev, err := s.EventEvidence(ctx, "postmark", c.Key)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Events) != 3 || ev.Events[0].ID != "d1" || ev.Events[0].Kind != ledger.EventDelivered || ev.Events[0].AddressKey() != addr[0] ||
		!ev.Events[0].Occurred.Equal(at) || !ev.Events[0].Received.Equal(clk.Now()) {
		t.Fatalf("events of the key: %+v; want d1, b1, c1 as recorded", ev.Events)
	}
	if ev, err := s.EventEvidence(ctx, "ses", c.Key); err != nil || len(ev.Events) != 0 {
		t.Fatalf("events of the key at another provider: %+v, %v; want none", ev.Events, err)
	}
}

// testSoftBounceStreak: an address is suppressed once it soft-bounced in
// the policy's number of consecutive ISO weeks, whatever key id the
// earlier bounces were stored under; two bounces in one week count once;
// a week without one starts the streak again.
func testSoftBounceStreak(t *testing.T, be Driver) {
	s, _, _ := fresh(t, be)
	ctx := context.Background()
	old, rotated := keyring(t, "k1"), keyring(t, "k2", "k1")
	addr := "soft@example.com"
	p := ledger.EventPolicy{SoftBounceWeeks: 3}
	monday := time.Date(2026, time.August, 3, 9, 0, 0, 0, time.UTC) // 2026-W32
	week := func(n int) time.Time { return monday.AddDate(0, 0, 7*n) }

	steps := []struct {
		at        time.Time
		kr        *digest.Keyring
		weeks     int
		suppresed bool
	}{
		{week(0), old, 1, false},
		{week(0).Add(time.Hour), old, 1, false}, // same week: counts once
		{week(1), rotated, 2, false},
		// week 2 has none: the streak ends
		{week(3), rotated, 1, false},
		{week(4), rotated, 2, false},
		{week(5), rotated, 3, true},
	}
	for i, st := range steps {
		out := record(t, s, ledger.ProviderEvent{Provider: "ses", ID: fmt.Sprint("s", i), Kind: ledger.EventSoftBounce,
			AddressKeys: st.kr.AddressKeys(addr), Occurred: st.at}, p)
		if out.SoftBounceWeeks != st.weeks || out.Suppressed != st.suppresed {
			t.Fatalf("soft bounce %d (%s): %+v; want %d weeks, suppressed %v", i, digest.WeekOf(st.at, time.UTC), out, st.weeks, st.suppresed)
		}
		if st.suppresed && out.Reason != digest.ReasonSoftBounce {
			t.Fatalf("suppressed for %s, want soft_bounce", out.Reason)
		}
	}
	got, err := s.Suppressed(ctx, rotated.AddressKeys(addr))
	if err != nil || len(got) != 1 {
		t.Fatalf("Suppressed = %v, %v; want the address", got, err)
	}
	// The first two weeks in a row with N=2: suppressed at once.
	other := "two@example.com"
	for i, n := range []int{0, 1} {
		out := record(t, s, ledger.ProviderEvent{Provider: "ses", ID: fmt.Sprint("t", i), Kind: ledger.EventSoftBounce,
			AddressKeys: old.AddressKeys(other), Occurred: week(n)}, ledger.EventPolicy{SoftBounceWeeks: 2})
		if out.Suppressed != (n == 1) {
			t.Fatalf("N=2, week %d: %+v", n, out)
		}
	}
}

// testEventEvidenceAndWatermark: the evidence of a key holds its
// receipt's send time; the provider's newest time is the latest event's,
// but never past when it was received; the operator's watermark moves
// only forward and needs who and why; Watermarks lists each provider.
func testEventEvidenceAndWatermark(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	k := keys(t, "cust_watermark")
	c := mustClaim(t, s, req(k, "fp1"))
	clk.Advance(time.Second)
	started := clk.Now()
	if err := start1(t, s, c.Key, c.Token); err != nil {
		t.Fatal(err)
	}
	ev, err := s.EventEvidence(ctx, "ses", c.Key)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Receipt || !ev.SendAt.Equal(started) || len(ev.Events) != 0 || !ev.Watermark.Newest.IsZero() || !ev.Watermark.Until.IsZero() {
		t.Fatalf("evidence before any event: %+v; want the receipt's send start %s, nothing else", ev, started)
	}
	if ev, err := s.EventEvidence(ctx, "ses", keys(t, "cust_unknown")[0]); err != nil || ev.Receipt {
		t.Fatalf("evidence of a key without a receipt: %+v, %v", ev, err)
	}

	clk.Advance(time.Hour)
	record(t, s, ledger.ProviderEvent{Provider: "ses", ID: "a", Kind: ledger.EventAccepted, Occurred: started.Add(time.Minute)}, ledger.EventPolicy{})
	record(t, s, ledger.ProviderEvent{Provider: "ses", ID: "b", Kind: ledger.EventDelivered, Occurred: started.Add(30 * time.Minute)}, ledger.EventPolicy{})
	ev, _ = s.EventEvidence(ctx, "ses", c.Key)
	if !ev.Watermark.Newest.Equal(started.Add(30 * time.Minute)) {
		t.Fatalf("newest %s; want the latest event's time", ev.Watermark.Newest)
	}
	// A provider clock a day ahead counts as the time it was received.
	record(t, s, ledger.ProviderEvent{Provider: "ses", ID: "c", Kind: ledger.EventDelivered, Occurred: clk.Now().Add(24 * time.Hour)}, ledger.EventPolicy{})
	ev, _ = s.EventEvidence(ctx, "ses", c.Key)
	if !ev.Watermark.Newest.Equal(clk.Now()) {
		t.Fatalf("newest %s after an event from the future; want the time it was received, %s", ev.Watermark.Newest, clk.Now())
	}
	if got := ev.Watermark.At(time.Hour); !got.Equal(clk.Now().Add(-time.Hour)) {
		t.Fatalf("watermark at a lag of 1h: %s", got)
	}
	received := clk.Now()

	op := ledger.Action{By: "oncall", Reason: "SES console shows no backlog"}
	if _, err := s.AdvanceWatermark(ctx, "ses", started, ledger.Action{By: "oncall"}); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("AdvanceWatermark without a reason: %v; want ErrInvalid", err)
	}
	if _, err := s.AdvanceWatermark(ctx, "ses", clk.Now().Add(time.Minute), op); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("AdvanceWatermark past the ledger's now: %v; want ErrInvalid", err)
	}
	clk.Advance(10 * time.Minute)
	until := clk.Now()
	if got, err := s.AdvanceWatermark(ctx, "ses", until, op); err != nil || !got.Equal(until) {
		t.Fatalf("AdvanceWatermark = %s, %v; want %s", got, err, until)
	}
	if got, err := s.AdvanceWatermark(ctx, "ses", started, op); err != nil || !got.Equal(until) {
		t.Fatalf("AdvanceWatermark back = %s, %v; want it left at %s", got, err, until)
	}
	if got, err := s.AdvanceWatermark(ctx, "sendgrid", started, op); err != nil || !got.Equal(started) {
		t.Fatalf("AdvanceWatermark of a provider without events = %s, %v", got, err)
	}
	ev, _ = s.EventEvidence(ctx, "ses", c.Key)
	if !ev.Watermark.Until.Equal(until) || !ev.Watermark.At(48*time.Hour).Equal(until) {
		t.Fatalf("watermark %+v; want until %s to win over a long lag", ev.Watermark, until)
	}
	wms, err := s.Watermarks(ctx)
	if err != nil || len(wms) != 2 || wms[0].Provider != "sendgrid" || wms[0].Events != 0 || !wms[0].Until.Equal(started) ||
		wms[1].Provider != "ses" || wms[1].Events != 3 || !wms[1].Until.Equal(until) || !wms[1].Newest.Equal(received) {
		t.Fatalf("Watermarks = %+v, %v", wms, err)
	}
}

// testProviderEventsConcurrently: one event delivered by several requests
// at once is stored and acted on once.
func testProviderEventsConcurrently(t *testing.T, be Driver) {
	s, _, _ := fresh(t, be)
	ctx := context.Background()
	addr := keyring(t, "k1").AddressKeys("race@example.com")
	e := ledger.ProviderEvent{Provider: "mailgun", ID: "same", Kind: ledger.EventComplaint, AddressKeys: addr, Occurred: time.Now()}
	const n = 8
	var (
		wg                 sync.WaitGroup
		mu                 sync.Mutex
		stored, suppressed int
	)
	for range n {
		wg.Go(func() {
			out, err := s.RecordProviderEvent(ctx, e, ledger.EventPolicy{})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if !out.Replay {
				stored++
			}
			if out.Suppressed {
				suppressed++
			}
		})
	}
	wg.Wait()
	if stored != 1 || suppressed != 1 {
		t.Fatalf("%d requests of one event: stored %d, suppressed %d; want 1 and 1", n, stored, suppressed)
	}
	hist, err := s.SuppressionHistory(ctx, addr, 0)
	if err != nil || len(hist) != 1 {
		t.Fatalf("suppression history %+v, %v; want one add", hist, err)
	}
}

// testProviderEventsValidated: malformed events are refused.
func testProviderEventsValidated(t *testing.T, be Driver) {
	s, _, _ := fresh(t, be)
	ctx := context.Background()
	ok := ledger.ProviderEvent{Provider: "resend", ID: "x", Kind: ledger.EventDelivered, Occurred: time.Now()}
	for name, mut := range map[string]func(*ledger.ProviderEvent){
		"no provider": func(e *ledger.ProviderEvent) { e.Provider = "" },
		"no id":       func(e *ledger.ProviderEvent) { e.ID = "" },
		"other kind":  func(e *ledger.ProviderEvent) { e.Kind = "open" },
		"bad key":     func(e *ledger.ProviderEvent) { e.Key = "not-a-key" },
		"address":     func(e *ledger.ProviderEvent) { e.AddressKeys = []digest.SuppressionKey{"someone@example.com"} },
		"no time":     func(e *ledger.ProviderEvent) { e.Occurred = time.Time{} },
	} {
		e := ok
		mut(&e)
		if _, err := s.RecordProviderEvent(ctx, e, ledger.EventPolicy{}); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("%s: %v; want ErrInvalid", name, err)
		}
	}
	if wms, err := s.Watermarks(ctx); err != nil || len(wms) != 0 {
		t.Fatalf("Watermarks after refusals = %+v, %v; want none", wms, err)
	}
}
