package ledgertest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

var op = ledger.Action{By: "oncall", Reason: "checked the provider"}

// hold claims a key and finishes it held, as the runner does after an
// inconclusive look-up.
func hold(t *testing.T, s ledger.Store, k []digest.Key) {
	t.Helper()
	c := mustClaim(t, s, req(k, "fp1"))
	if err := start1(t, s, c.Key, c.Token); err != nil {
		t.Fatal(err)
	}
	if err := finish1(t, s, digest.Finish{Key: c.Key, Token: c.Token, State: digest.StateHeld, Reason: "lookup inconclusive"}); err != nil {
		t.Fatal(err)
	}
}

func testEveryTransitionLeavesAnEvent(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	k := keys(t, "customer_1")
	c := mustClaim(t, s, req(k, "fp1")) // absent → claimed
	start1(t, s, k[0], c.Token)         // claimed → claimed (send started)
	clk.Advance(2 * time.Minute)        //
	c = mustClaim(t, s, req(k, "fp1"))  // claimed → claimed (takeover)
	finish1(t, s, digest.Finish{Key: k[0], Token: c.Token, State: digest.StateRetryable, NextAttempt: clk.Now(), MaybeSent: true})
	c = mustClaim(t, s, req(k, "fp1")) // retryable → claimed
	finish1(t, s, digest.Finish{Key: k[0], Token: c.Token, State: digest.StateHeld, Reason: "lookup failed"})
	if err := s.Release(ctx, k[0], op); err != nil { // held → retryable
		t.Fatal(err)
	}
	c = mustClaim(t, s, req(k, "fp1")) // retryable → claimed
	if c.MaybeSent {
		t.Errorf("released row still MaybeSent")
	}
	finish1(t, s, digest.Finish{Key: k[0], Token: c.Token, State: digest.StateSent, ProviderRef: "ref-1"})
	claim1(t, s, req(k, "fp2")) // sent → quarantined

	_, events := show(t, s, k[0])
	type edge struct{ from, to digest.State }
	var got []edge
	for _, e := range events {
		got = append(got, edge{e.From, e.To})
		if e.Key != k[0] || e.At.IsZero() {
			t.Errorf("event %+v", e)
		}
	}
	C, S, R, H, Q := digest.StateClaimed, digest.StateSent, digest.StateRetryable, digest.StateHeld, digest.StateQuarantined
	want := []edge{{"", C}, {C, C}, {C, C}, {C, R}, {R, C}, {C, H}, {H, R}, {R, C}, {C, S}, {S, Q}}
	if !slices.Equal(got, want) {
		t.Fatalf("history\n got %v\nwant %v", got, want)
	}
	if ev := events[6]; ev.Detail == "" || ev.RunID != "" {
		t.Errorf("release event %+v: want who and why in the detail", ev)
	}
}

// testHappyPathToldByTheReceipt: a digest claimed, started and finished
// sent leaves no history row, and Show still tells claimed → send started
// → sent with their times from the receipt. A send start that replaces an
// earlier one (after a takeover) keeps the earlier start as a row, so
// every start stays in the history.
func testHappyPathToldByTheReceipt(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	k := keys(t, "customer_1")
	c := mustClaim(t, s, req(k, "fp1"))
	claimedAt := clk.Now()
	clk.Advance(time.Second)
	if err := start1(t, s, k[0], c.Token); err != nil {
		t.Fatal(err)
	}
	startedAt := clk.Now()
	clk.Advance(time.Second)
	if err := finish1(t, s, digest.Finish{Key: k[0], Token: c.Token, State: digest.StateSent, ProviderRef: "ref-1", RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	_, events := show(t, s, k[0])
	want := []ledger.Event{
		{Key: k[0], At: claimedAt, To: digest.StateClaimed, RunID: "run-1", Detail: ledger.HistoryClaimed, FromReceipt: true},
		{Key: k[0], At: startedAt, From: digest.StateClaimed, To: digest.StateClaimed, RunID: "run-1", Detail: ledger.HistorySendStarted, FromReceipt: true},
		{Key: k[0], At: clk.Now(), From: digest.StateClaimed, To: digest.StateSent, RunID: "run-1", Detail: "provider ref ref-1", FromReceipt: true},
	}
	if !slices.EqualFunc(events, want, sameEvent) {
		t.Errorf("happy-path history\n got %+v\nwant %+v", events, want)
	}

	// Started, taken over, started again, sent.
	k2 := keys(t, "customer_2")
	c = mustClaim(t, s, req(k2, "fp1"))
	firstStart := clk.Now()
	if err := start1(t, s, k2[0], c.Token); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	r2 := req(k2, "fp1")
	r2.RunID = "run-2"
	c = mustClaim(t, s, r2)
	takenAt := clk.Now()
	clk.Advance(time.Second)
	if err := start1(t, s, k2[0], c.Token); err != nil {
		t.Fatal(err)
	}
	secondStart := clk.Now()
	if err := finish1(t, s, digest.Finish{Key: k2[0], Token: c.Token, State: digest.StateSent, ProviderRef: "ref-2", RunID: "run-2"}); err != nil {
		t.Fatal(err)
	}
	_, events = show(t, s, k2[0])
	want = []ledger.Event{
		{Key: k2[0], At: firstStart, To: digest.StateClaimed, RunID: "run-1", Detail: ledger.HistoryClaimed, FromReceipt: true},
		{Key: k2[0], At: firstStart, From: digest.StateClaimed, To: digest.StateClaimed, RunID: "run-1", Detail: ledger.HistorySendStarted},
		{Key: k2[0], At: takenAt, From: digest.StateClaimed, To: digest.StateClaimed, RunID: "run-2",
			Detail: ledger.ClaimHistory(digest.StateClaimed, digest.StateClaimed, true)},
		{Key: k2[0], At: secondStart, From: digest.StateClaimed, To: digest.StateClaimed, RunID: "run-2", Detail: ledger.HistorySendStarted, FromReceipt: true},
		{Key: k2[0], At: secondStart, From: digest.StateClaimed, To: digest.StateSent, RunID: "run-2", Detail: "provider ref ref-2", FromReceipt: true},
	}
	if !slices.EqualFunc(events, want, sameEvent) {
		t.Errorf("history after a takeover\n got %+v\nwant %+v", events, want)
	}
}

// sameEvent compares events but for their row ids.
func sameEvent(a, b ledger.Event) bool {
	a.ID, b.ID = 0, 0
	return a.At.Equal(b.At) && a.Key == b.Key && a.From == b.From && a.To == b.To && a.RunID == b.RunID &&
		a.Detail == b.Detail && a.FromReceipt == b.FromReceipt
}

func testOperatorReleaseAndMarkSent(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	held, sentLater, notHeld := keys(t, "customer_1"), keys(t, "customer_2"), keys(t, "customer_3")
	hold(t, s, held)
	hold(t, s, sentLater)
	mustClaim(t, s, req(notHeld, "fp1"))
	wantOutcome(t, claim1(t, s, req(held, "fp1")), digest.OutcomeHeld)

	list, err := s.List(ctx, ledger.ListFilter{State: digest.StateHeld, Week: week})
	if err != nil || len(list) != 2 {
		t.Fatalf("list held: %v %v", list, err)
	}
	if err := s.Release(ctx, held[0], op); err != nil {
		t.Fatal(err)
	}
	if c := mustClaim(t, s, req(held, "fp1")); c.MaybeSent {
		t.Errorf("released for resend but MaybeSent: %+v", c)
	}
	if err := s.MarkSent(ctx, sentLater[0], "ref-ops", op); err != nil {
		t.Fatal(err)
	}
	got := claim1(t, s, req(sentLater, "fp1"))
	wantOutcome(t, got, digest.OutcomeAlreadySent)
	if got.ProviderRef != "ref-ops" || !got.SentAt.Equal(clk.Now()) {
		t.Errorf("marked sent: %+v", got)
	}
	for _, k := range []digest.Key{notHeld[0], sentLater[0]} {
		if err := s.Release(ctx, k, op); !errors.Is(err, ledger.ErrWrongState) {
			t.Errorf("release %s: %v, want ErrWrongState", k, err)
		}
		if err := s.MarkSent(ctx, k, "x", op); !errors.Is(err, ledger.ErrWrongState) {
			t.Errorf("mark sent %s: %v, want ErrWrongState", k, err)
		}
	}
	absent := keys(t, "customer_404")[0]
	if err := s.Release(ctx, absent, op); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("release absent: %v", err)
	}
}

func testReleaseQuarantined(t *testing.T, be Driver) {
	s, _, _ := fresh(t, be)
	ctx := context.Background()
	unsent, sent := keys(t, "customer_1"), keys(t, "customer_2")
	mustClaim(t, s, req(unsent, "fp1"))
	wantOutcome(t, claim1(t, s, req(unsent, "fp2")), digest.OutcomeQuarantined)
	if err := s.Release(ctx, unsent[0], op); err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, claim1(t, s, req(unsent, "fp1")), digest.OutcomeQuarantined) // old content now differs
	if r, _ := show(t, s, unsent[0]); r.State != digest.StateQuarantined || r.Fingerprint != "fp2" {
		t.Fatalf("after release the new fingerprint governs: %+v", r)
	}

	send(t, s, sent, "ref-1")
	claim1(t, s, req(sent, "fp2"))
	if err := s.Release(ctx, sent[0], op); !errors.Is(err, ledger.ErrWasSent) {
		t.Fatalf("release of a sent quarantined row: %v, want ErrWasSent", err)
	}
}

func testReleasedQuarantineIsClaimable(t *testing.T, be Driver) {
	s, _, _ := fresh(t, be)
	k := keys(t, "customer_1")
	mustClaim(t, s, req(k, "fp1"))
	claim1(t, s, req(k, "fp2"))
	if err := s.Release(context.Background(), k[0], op); err != nil {
		t.Fatal(err)
	}
	if c := mustClaim(t, s, req(k, "fp2")); c.Attempt != 2 {
		t.Fatalf("claim after release: %+v", c)
	}
}

func testCountsAndList(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	mustClaim(t, s, req(keys(t, "customer_1"), "fp1"))
	clk.Advance(time.Minute)
	c := mustClaim(t, s, req(keys(t, "customer_2"), "fp1"))
	finish1(t, s, digest.Finish{Key: c.Key, Token: c.Token, State: digest.StateRetryable, NextAttempt: clk.Now().Add(time.Hour)})
	mustClaim(t, s, req(keys(t, "customer_3"), "fp1"))
	clk.Advance(time.Minute)
	counts, err := s.Counts(ctx, week)
	if err != nil {
		t.Fatal(err)
	}
	if counts.ByState[digest.StateClaimed] != 2 || counts.ByState[digest.StateRetryable] != 1 {
		t.Errorf("counts %+v", counts.ByState)
	}
	if counts.OldestClaimed != 2*time.Minute || counts.OldestRetryable != time.Minute {
		t.Errorf("ages %v %v, want 2m 1m", counts.OldestClaimed, counts.OldestRetryable)
	}
	var seen []digest.Key
	for after := digest.Key(""); ; {
		page, err := s.List(ctx, ledger.ListFilter{Week: week, After: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			seen = append(seen, r.Key)
		}
		after = page[len(page)-1].Key
	}
	if len(seen) != 3 || !slices.IsSorted(seen) {
		t.Fatalf("paged list %v", seen)
	}
	if other, _ := s.List(ctx, ledger.ListFilter{Week: week.Next()}); len(other) != 0 {
		t.Fatalf("list of another week: %v", other)
	}
}

func testPrune(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	sent, held, quarantined := keys(t, "old_sent"), keys(t, "old_held"), keys(t, "old_quarantined")
	send(t, s, sent, "")
	hold(t, s, held)
	mustClaim(t, s, req(quarantined, "fp1"))
	claim1(t, s, req(quarantined, "fp2"))
	s.Observe(ctx, []digest.Observation{{Keys: sent, Fingerprint: "fp1", Week: week}})
	clk.Advance(48 * time.Hour)
	cutoff := clk.Now()
	recent := keys(t, "recent")
	mustClaim(t, s, req(recent, "fp1"))

	p := ledger.PruneRequest{Before: cutoff}
	dry := p
	dry.DryRun = true
	if n, err := s.Prune(ctx, dry); err != nil || n.Receipts != 1 {
		t.Fatalf("dry run: %+v %v, want 1", n, err)
	}
	if _, _, err := s.Show(ctx, sent[0]); err != nil {
		t.Fatalf("dry run removed: %v", err)
	}
	if n, err := s.Prune(ctx, p); err != nil || n.Receipts != 1 {
		t.Fatalf("prune: %+v %v, want 1", n, err)
	}
	if _, _, err := s.Show(ctx, sent[0]); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("pruned receipt: %v", err)
	}
	for _, k := range [][]digest.Key{held, quarantined, recent} {
		if _, ev := show(t, s, k[0]); len(ev) == 0 {
			t.Fatalf("%s lost its history", k[0])
		}
	}
	if n, err := s.Prune(ctx, ledger.PruneRequest{Before: cutoff, IncludeHeld: true}); err != nil || n.Receipts != 1 {
		t.Fatalf("prune held: %+v %v", n, err)
	}
	if n, err := s.Prune(ctx, ledger.PruneRequest{Before: cutoff, IncludeQuarantined: true}); err != nil || n.Receipts != 1 {
		t.Fatalf("prune quarantined: %+v %v", n, err)
	}
	if list, _ := s.List(ctx, ledger.ListFilter{}); len(list) != 1 || list[0].Key != recent[0] {
		t.Fatalf("left after prune: %v", list)
	}
	if r, _ := s.Repeats(ctx, digest.ISOWeek{}, time.Hour); r.Observations != 0 {
		t.Fatalf("old observations kept: %+v", r)
	}
}
