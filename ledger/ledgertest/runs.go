package ledgertest

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// RecordRunEnd keeps the last run's end per pin; LastRun reads it back.
func testRecordRunEnd(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	pin := digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v3"}
	other := digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v4"}
	if _, ok, err := s.LastRun(ctx, pin); err != nil || ok {
		t.Fatalf("LastRun before any run: %v, %v; want none", ok, err)
	}
	start := clk.Now()
	observe := ledger.RunEnd{RunID: "r1", Mode: "observe", ExitCode: 0, StartedAt: start, EndedAt: start.Add(time.Minute)}
	if err := s.RecordRunEnd(ctx, pin, observe); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.LastRun(ctx, pin)
	if err != nil || !ok || got != observe {
		t.Fatalf("LastRun = %+v, %v, %v; want %+v", got, ok, err, observe)
	}
	enforce := ledger.RunEnd{RunID: "r2", Mode: "enforce", Shard: "0/2", ExitCode: 3,
		StartedAt: start.Add(2 * time.Minute), EndedAt: start.Add(3*time.Minute + 1500*time.Nanosecond)}
	if err := s.RecordRunEnd(ctx, pin, enforce); err != nil {
		t.Fatal(err)
	}
	got, _, err = s.LastRun(ctx, pin)
	enforce.EndedAt = enforce.EndedAt.Truncate(time.Microsecond) // the ledger's precision
	if err != nil || got != enforce {
		t.Fatalf("LastRun after a second run = %+v, %v; want %+v", got, err, enforce)
	}
	if _, ok, err := s.LastRun(ctx, other); err != nil || ok {
		t.Fatalf("LastRun of another version: %v, %v; want none", ok, err)
	}
	if err := s.RecordRunEnd(ctx, pin, ledger.RunEnd{Mode: "enforce", EndedAt: start}); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("RecordRunEnd without a run id: %v; want ErrInvalid", err)
	}
}

// RecordExpectation keeps one expectation per pin and shard, the last one
// recorded; it counts the week's receipts under another key id than the
// pin's; Expectations reads them back in shard order, with the other
// pins of the week and whether it has observations.
func testRecordExpectation(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	pin := digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v3"}
	ex, err := s.Expectations(ctx, pin)
	if err != nil || len(ex.Rows) != 0 || ex.OtherPins != 0 || ex.Observed {
		t.Fatalf("Expectations of a fresh week = %+v, %v; want none", ex, err)
	}
	send(t, s, keys(t, "customer_1"), "ref-1") // under k1
	asOf := clk.Now().Truncate(time.Microsecond)
	e := ledger.Expectation{Shard: "1/2", AsOf: asOf, Zone: "UTC", KeyID: "k2", Send: 10, Suppressed: 2, Empty: 3, NotBuilt: 1,
		Ghosts: map[digest.State]int64{digest.StateSent: 1}, RunID: "r1", RecordedAt: asOf}
	if err := s.RecordExpectation(ctx, pin, e); err != nil {
		t.Fatal(err)
	}
	e0 := e
	e0.Shard, e0.KeyID, e0.SendEmpty, e0.Ghosts, e0.RunID = "0/2", "k1", true, map[digest.State]int64{}, "r2"
	if err := s.RecordExpectation(ctx, pin, e0); err != nil {
		t.Fatal(err)
	}
	e.Send = 11 // a later read of shard 1/2 replaces the first
	if err := s.RecordExpectation(ctx, pin, e); err != nil {
		t.Fatal(err)
	}
	ex, err = s.Expectations(ctx, pin)
	if err != nil || len(ex.Rows) != 2 {
		t.Fatalf("Expectations = %+v, %v; want two shards", ex, err)
	}
	e.OtherKeyIDs = 1 // the receipt under k1, counted when recorded under k2
	for i, want := range []ledger.Expectation{e0, e} {
		got := ex.Rows[i]
		if !reflect.DeepEqual(got, want) {
			t.Errorf("expectation %d = %+v, want %+v", i, got, want)
		}
	}
	if err := s.RecordExpectation(ctx, pin, ledger.Expectation{Shard: "all"}); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("RecordExpectation without an as_of: %v; want ErrInvalid", err)
	}
	other := digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v4"}
	if err := s.RecordRunEnd(ctx, other, ledger.RunEnd{RunID: "r3", Mode: "observe", EndedAt: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Observe(ctx, []digest.Observation{{Keys: keys(t, "customer_2"), Fingerprint: "fp", Week: week, RunID: "obs"}}); err != nil {
		t.Fatal(err)
	}
	ex, err = s.Expectations(ctx, pin)
	if err != nil || ex.OtherPins != 1 || !ex.Observed {
		t.Fatalf("Expectations after a run of another version and an observation = %d other pins, observed %v, %v; want 1, true", ex.OtherPins, ex.Observed, err)
	}
	if ex, err := s.Expectations(ctx, other); err != nil || len(ex.Rows) != 0 || ex.OtherPins != 0 {
		t.Fatalf("Expectations of the other version = %+v, %v; want none recorded, no other pin (its own run end)", ex, err)
	}
}

// Counts counts the week's receipts by state exactly through every kind
// of change: claims (new, reclaimed, quarantined), sends, failures,
// retries, a crashed claim ended held or failed, a release, an
// acknowledgement, and a prune (PostgreSQL keeps the counts in counters
// its triggers update; they must agree with the receipts themselves).
func testCountsFollowEveryChange(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	check := func(what string) {
		t.Helper()
		c, err := s.Counts(ctx, week)
		if err != nil {
			t.Fatal(err)
		}
		want := map[digest.State]int64{}
		for f := (ledger.ListFilter{Week: week, Limit: 1000}); ; {
			page, err := s.List(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page {
				want[r.State]++
			}
			if len(page) < f.PageSize() {
				break
			}
			f.After = page[len(page)-1].Key
		}
		got := map[digest.State]int64{}
		for st, n := range c.ByState {
			if n != 0 {
				got[st] = n
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: Counts = %v, the receipts = %v", what, got, want)
		}
	}
	check("empty week")
	var sent []digest.ClaimResult
	for i := range 6 {
		sent = append(sent, send(t, s, keys(t, "customer_"+strconv.Itoa(i)), "ref"))
	}
	check("six sent")
	failed := mustClaim(t, s, req(keys(t, "customer_f"), "fp1"))
	finish1(t, s, digest.Finish{Key: failed.Key, Token: failed.Token, State: digest.StateFailed, Reason: "550"})
	retry := mustClaim(t, s, req(keys(t, "customer_r"), "fp1"))
	finish1(t, s, digest.Finish{Key: retry.Key, Token: retry.Token, State: digest.StateRetryable, Reason: "451", NextAttempt: clk.Now()})
	idle := mustClaim(t, s, req(keys(t, "customer_i"), "fp1"))
	started := mustClaim(t, s, req(keys(t, "customer_s"), "fp1"))
	if err := start1(t, s, started.Key, started.Token); err != nil {
		t.Fatal(err)
	}
	check("claims, a failure, a retry")
	wantOutcome(t, claim1(t, s, req(keys(t, "customer_0"), "fp2")), digest.OutcomeQuarantined)
	check("a sent digest changed: quarantined")
	clk.Advance(2 * time.Minute) // the claims' leases expire
	if _, err := s.EndClaims(ctx, []digest.EndClaim{{Keys: keys(t, "customer_i"), Week: week, Reason: "suppressed"},
		{Keys: keys(t, "customer_s"), Week: week, Reason: "suppressed"}}); err != nil {
		t.Fatal(err)
	}
	check("crashed claims ended failed and held")
	_ = idle
	by := ledger.Action{By: "ops", Reason: "test"}
	if err := s.Release(ctx, started.Key, by); err != nil && !errors.Is(err, ledger.ErrMaybeSent) {
		t.Fatal(err)
	}
	if err := s.Acknowledge(ctx, sent[0].Key, false, by); err != nil {
		t.Fatal(err)
	}
	check("released, acknowledged")
	again := mustClaim(t, s, req(keys(t, "customer_r"), "fp1"))
	finish1(t, s, digest.Finish{Key: again.Key, Token: again.Token, State: digest.StateSent, ProviderRef: "ref"})
	check("the retry sent")
	clk.Advance(30 * 24 * time.Hour)
	if _, err := s.Prune(ctx, ledger.PruneRequest{Before: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	check("pruned")
	send(t, s, keys(t, "customer_new"), "ref")
	check("a digest sent after the prune")
}
