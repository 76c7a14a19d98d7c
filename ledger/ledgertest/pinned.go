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
