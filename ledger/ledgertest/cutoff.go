package ledgertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// A pin made with an early cutoff says so, to PinSnapshot's later callers
// and to Pinned; a later proposal never makes it whole.
func testPinSnapshotPartial(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	pin := digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v3"}
	asOf := clk.Now().Add(-time.Hour)
	wp, err := s.PinSnapshot(ctx, pin, digest.WeekPin{AsOf: asOf, Zone: "UTC", KeyID: "k1", Partial: true})
	if err != nil || !wp.Partial || !wp.AsOf.Equal(asOf) || !wp.RepinnedFrom.IsZero() {
		t.Fatalf("first pin = %+v, %v; want partial at %v", wp, err, asOf)
	}
	wp, err = s.PinSnapshot(ctx, pin, digest.WeekPin{AsOf: clk.Now(), Zone: "UTC", KeyID: "k1"})
	if err != nil || !wp.Partial || !wp.AsOf.Equal(asOf) {
		t.Fatalf("second pin = %+v, %v; want the first (partial at %v)", wp, err, asOf)
	}
	if wp, ok, err := s.Pinned(ctx, pin); err != nil || !ok || !wp.Partial {
		t.Fatalf("Pinned = %+v, %v, %v; want partial", wp, ok, err)
	}
	other := digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v4"}
	if wp, err := s.PinSnapshot(ctx, other, digest.WeekPin{AsOf: asOf, Zone: "UTC", KeyID: "k1"}); err != nil || wp.Partial {
		t.Fatalf("a whole pin = %+v, %v; want not partial", wp, err)
	}
}

// Repin moves a cutoff forward only, makes a partial pin whole, records
// where it was, and refuses what it cannot move.
func testRepin(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	by := ledger.Action{By: "oncall", Reason: "pinned early by an old binary"}
	pin := digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v3"}
	end := week.End(time.UTC).Add(4 * time.Hour)
	if _, err := s.Repin(ctx, pin, end, by); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("repin of an unpinned week: %v, want ErrNotFound", err)
	}
	early := week.Start(time.UTC).Add(30 * time.Hour)
	if _, err := s.PinSnapshot(ctx, pin, digest.WeekPin{AsOf: early, Zone: "UTC", KeyID: "k1"}); err != nil {
		t.Fatal(err)
	}
	from, err := s.Repin(ctx, pin, end, by)
	if err != nil || !from.Equal(early) {
		t.Fatalf("repin = %v, %v; want moved from %v", from, err, early)
	}
	wp, ok, err := s.Pinned(ctx, pin)
	if err != nil || !ok || !wp.AsOf.Equal(end) || wp.Partial || !wp.RepinnedFrom.Equal(early) || wp.Zone != "UTC" || wp.KeyID != "k1" {
		t.Fatalf("after repin Pinned = %+v, %v, %v; want as_of %v, from %v, zone and key id kept", wp, ok, err, end, early)
	}
	// What every later run reads.
	if wp, err := s.PinSnapshot(ctx, pin, digest.WeekPin{AsOf: clk.Now(), Zone: "UTC", KeyID: "k2"}); err != nil || !wp.AsOf.Equal(end) || !wp.RepinnedFrom.Equal(early) {
		t.Fatalf("PinSnapshot after repin = %+v, %v; want as_of %v", wp, err, end)
	}
	for _, to := range []time.Time{end, early} { // never again to the same, never back
		if _, err := s.Repin(ctx, pin, to, by); !errors.Is(err, ledger.ErrWrongState) {
			t.Fatalf("repin to %v of a pin at %v: %v, want ErrWrongState", to, end, err)
		}
	}

	// A partial pin is made whole where it stands, and only once.
	part := digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v5"}
	if _, err := s.PinSnapshot(ctx, part, digest.WeekPin{AsOf: end, Zone: "UTC", KeyID: "k1", Partial: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Repin(ctx, part, end, by); err != nil {
		t.Fatalf("repin of a partial pin to its own as_of: %v", err)
	}
	if wp, _, err := s.Pinned(ctx, part); err != nil || wp.Partial || !wp.AsOf.Equal(end) {
		t.Fatalf("after repin = %+v, %v; want whole at %v", wp, err, end)
	}
	if _, err := s.Repin(ctx, part, end, by); !errors.Is(err, ledger.ErrWrongState) {
		t.Fatalf("second repin: %v, want ErrWrongState", err)
	}
}

// ObservedKeys finds, of the keys it is given, each observed in the week
// once, and none of another week, of a claim, or not asked for.
func testObservedKeys(t *testing.T, be Driver) {
	s, _, _ := fresh(t, be)
	ctx := context.Background()
	a, b := keys(t, "alice"), keys(t, "bob")
	for range 2 {
		if _, err := s.Observe(ctx, []digest.Observation{{Keys: a, Fingerprint: "fp", Week: week, RunID: "observe"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Observe(ctx, []digest.Observation{{Keys: b, Fingerprint: "fp", Week: week.Next(), RunID: "observe"}}); err != nil {
		t.Fatal(err)
	}
	c, d := keys(t, "carol"), keys(t, "dave")
	mustClaim(t, s, req(c, "fp"))
	if _, err := s.Observe(ctx, []digest.Observation{{Keys: d, Fingerprint: "fp", Week: week, RunID: "observe"}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ObservedKeys(ctx, week, []digest.Key{a[0], b[0], c[0], "k1:unknown"})
	if err != nil || len(got) != 1 || !got[a[0]] {
		t.Fatalf("ObservedKeys = %v, %v; want only alice's key %s (dave's was not asked for)", got, err, a[0])
	}
	if none, err := s.ObservedKeys(ctx, week, nil); err != nil || len(none) != 0 {
		t.Fatalf("ObservedKeys of no keys = %v, %v; want none", none, err)
	}
}
