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
