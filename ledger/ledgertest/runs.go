package ledgertest

import (
	"context"
	"errors"
	"reflect"
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
