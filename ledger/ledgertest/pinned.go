package ledgertest

import (
	"context"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// Pinned reads a week's pin and never makes one.
func testPinnedReadsWithoutPinning(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	pin := digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v3"}
	for range 2 {
		if _, ok, err := s.Pinned(ctx, pin); err != nil || ok {
			t.Fatalf("Pinned before any run: %v, %v; want not pinned", ok, err)
		}
	}
	asOf := clk.Now().Add(-time.Hour)
	if _, err := s.PinSnapshot(ctx, pin, digest.WeekPin{AsOf: asOf, Zone: "Europe/Berlin", KeyID: "k1"}); err != nil {
		t.Fatal(err)
	}
	wp, ok, err := s.Pinned(ctx, pin)
	if err != nil || !ok || !wp.AsOf.Equal(asOf) || wp.Zone != "Europe/Berlin" || wp.KeyID != "k1" {
		t.Fatalf("Pinned = %+v, %v, %v; want as_of %v, Europe/Berlin, k1", wp, ok, err, asOf)
	}
}

// WeekPins lists every pin of one week, none of another: a run ends the
// claims of customers not in its source only when its pin is the week's
// only one (receipts do not say which type or version a key is of).
func testWeekPinsListsTheWeeksPins(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	if pins, err := s.WeekPins(ctx, week); err != nil || len(pins) != 0 {
		t.Fatalf("WeekPins before any run = %v, %v; want none", pins, err)
	}
	want := []digest.SnapshotPin{
		{Type: "weekly_activity", Week: week, Version: "v1"},
		{Type: "weekly_activity", Week: week, Version: "v2"},
		{Type: "monthly_summary", Week: week, Version: "v1"},
	}
	other := digest.SnapshotPin{Type: "weekly_activity", Week: week.Next(), Version: "v1"}
	for _, p := range append(want, other) {
		if _, err := s.PinSnapshot(ctx, p, digest.WeekPin{AsOf: clk.Now(), Zone: "UTC", KeyID: "k1"}); err != nil {
			t.Fatal(err)
		}
	}
	pins, err := s.WeekPins(ctx, week)
	if err != nil {
		t.Fatal(err)
	}
	got := map[digest.SnapshotPin]bool{}
	for _, p := range pins {
		got[p] = true
	}
	if len(pins) != len(want) || len(got) != len(want) {
		t.Fatalf("WeekPins = %v; want %v", pins, want)
	}
	for _, p := range want {
		if !got[p] {
			t.Errorf("WeekPins lacks %v: %v", p, pins)
		}
	}
}

// WeekUnfinished counts the week's claimed and retryable receipts, of no
// other state or week: with none, a run asks EndClaims for nothing.
func testWeekUnfinishedCountsClaimedAndRetryable(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	unfinished := func(w digest.ISOWeek) int64 {
		t.Helper()
		n, err := s.WeekUnfinished(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := unfinished(week); n != 0 {
		t.Fatalf("WeekUnfinished of an empty week = %d, want 0", n)
	}
	claimed := mustClaim(t, s, req(keys(t, "customer_1"), "fp1"))
	retry := mustClaim(t, s, req(keys(t, "customer_2"), "fp1"))
	send(t, s, keys(t, "customer_3"), "ref-3")
	failed := mustClaim(t, s, req(keys(t, "customer_4"), "fp1"))
	other := req(keys(t, "customer_5"), "fp1")
	other.Week = week.Next()
	mustClaim(t, s, other)
	if err := finish1(t, s, digest.Finish{Key: retry.Key, Token: retry.Token, State: digest.StateRetryable, NextAttempt: clk.Now().Add(time.Hour), Reason: "421"}); err != nil {
		t.Fatal(err)
	}
	if err := finish1(t, s, digest.Finish{Key: failed.Key, Token: failed.Token, State: digest.StateFailed, Reason: "550"}); err != nil {
		t.Fatal(err)
	}
	if n := unfinished(week); n != 2 {
		t.Fatalf("WeekUnfinished = %d, want 2 (one claimed, one retryable; sent and failed not counted)", n)
	}
	if err := finish1(t, s, digest.Finish{Key: claimed.Key, Token: claimed.Token, State: digest.StateSent, ProviderRef: "ref-1"}); err != nil {
		t.Fatal(err)
	}
	if n := unfinished(week); n != 1 {
		t.Fatalf("WeekUnfinished after a send = %d, want 1", n)
	}
	if n := unfinished(week.Next()); n != 1 {
		t.Fatalf("WeekUnfinished of the next week = %d, want its 1 claim", n)
	}
}
