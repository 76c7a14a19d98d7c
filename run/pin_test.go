package run_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/snapshot"
)

// Test keyrings: the secrets differ, so a key id names different keys.
const (
	ring1 = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	ring2 = "k2:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="
)

func mustKeyring(t *testing.T, s string) *digest.Keyring {
	t.Helper()
	kr, err := digest.ParseKeyring(s)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// keyIDs counts the week's receipts by key id.
func (f *fixture) keyIDs() map[string]int {
	f.t.Helper()
	out := map[string]int{}
	after := digest.Key("")
	for {
		rs, err := f.store.List(context.Background(), ledger.ListFilter{Week: runWeek, After: after, Limit: 1000})
		if err != nil {
			f.t.Fatal(err)
		}
		for _, r := range rs {
			out[r.KeyID]++
		}
		if len(rs) < 1000 {
			return out
		}
		after = rs[len(rs)-1].Key
	}
}

// Issue 11, case 3: k1 → k2,k1 (nothing sent) → k2 alone used to send the
// whole week again. It is refused, naming k1 and the count, before any
// claim; put back, nothing is sent.
func TestRunKeyringWithoutTheWeeksKeyIDIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 20)
	p := newProvider()
	withKeys := func(s string) *run.Runner {
		r := f.runner(p, p, nil)
		r.Keyring = mustKeyring(t, s)
		return r
	}
	if sum := f.run(withKeys(ring1)); sum.Sent != f.want {
		t.Fatalf("first run: %+v", sum)
	}
	if sum := f.run(withKeys(ring2 + "," + ring1)); sum.Sent != 0 || sum.Duplicates != f.want {
		t.Fatalf("rotated keyring: %+v, want %d duplicates", sum, f.want)
	}
	sum, err := withKeys(ring2).Run(context.Background())
	if !errors.Is(err, run.ErrConfig) || !strings.Contains(err.Error(), "key id k1") ||
		!strings.Contains(err.Error(), "lacks key ids") || sum.Sent != 0 || sum.Duplicates != 0 {
		t.Fatalf("keyring without k1: %+v %v, want a refusal naming k1", sum, err)
	}
	if want := "lacks key ids that receipts of week 2026-W40 are stored under: "; !strings.Contains(err.Error(), want) {
		t.Fatalf("message %q lacks %q", err, want)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("%d under key id k1", f.want)) {
		t.Fatalf("message %q does not count the %d receipts under k1", err, f.want)
	}
	if acc, dups := p.totals(); acc != f.want || dups != 0 {
		t.Fatalf("provider accepted %d keys with %d duplicates", acc, dups)
	}
	if got := f.keyIDs(); len(got) != 1 || got["k1"] != f.want {
		t.Fatalf("receipts by key id %v, want all %d under k1", got, f.want)
	}
}

// Runs of one week with differently ordered keyrings create every receipt
// under the key id pinned by the week's first run, so no digest ever gets
// two receipts, whichever keyring comes first.
func TestRunKeysNewReceiptsUnderTheWeeksPinnedKeyID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ first, second, pinned string }{
		{ring1, ring2 + "," + ring1, "k1"},
		{ring2, ring1 + "," + ring2, "k2"},
	} {
		t.Run(tc.pinned, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 30)
			p := newProvider()
			// The first run sends a third of the week (its shard), the
			// second, with the other keyring, the rest.
			r := f.runner(p, p, func(c *run.Config) { c.Shard = digest.Shard{Index: 0, Count: 3} })
			r.Keyring = mustKeyring(t, tc.first)
			first := f.run(r)
			r = f.runner(p, p, nil)
			r.Keyring = mustKeyring(t, tc.second)
			second := f.run(r)
			if first.Sent+second.Sent != f.want || second.Duplicates != first.Sent || first.Sent == 0 {
				t.Fatalf("runs sent %d + %d (second saw %d duplicates), want %d in all", first.Sent, second.Sent, second.Duplicates, f.want)
			}
			if got := f.keyIDs(); len(got) != 1 || got[tc.pinned] != f.want {
				t.Fatalf("receipts by key id %v, want all %d under %s", got, f.want, tc.pinned)
			}
			if acc, dups := p.totals(); acc != f.want || dups != 0 {
				t.Fatalf("provider accepted %d keys with %d duplicates", acc, dups)
			}
		})
	}
}

// A week pinned to a key id that the keyring lacks is refused even before
// any receipt exists under it: a run holding that key id may be creating
// them at this moment.
func TestRunPinnedKeyIDMissingWithoutReceiptsIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10)
	p := newProvider()
	// An enforce run under k1 pinned the week and has claimed nothing yet.
	pin := digest.SnapshotPin{Type: "weekly_activity", Week: runWeek, Version: "v1"}
	if _, err := f.store.PinSnapshot(context.Background(), pin, digest.WeekPin{AsOf: run.Cutoff(runWeek, time.UTC, run.DefaultSettle), Zone: "UTC", KeyID: "k1"}); err != nil {
		t.Fatal(err)
	}
	r := f.runner(p, p, nil)
	r.Keyring = mustKeyring(t, ring2)
	if _, err := r.Run(context.Background()); !errors.Is(err, run.ErrConfig) || !strings.Contains(err.Error(), "pinned to key id k1") {
		t.Fatalf("Run = %v, want a refusal naming the pinned k1", err)
	}
	if len(p.sends) != 0 || len(f.keyIDs()) != 0 {
		t.Fatalf("sent %d, receipts %v; want none", len(p.sends), f.keyIDs())
	}
}

// Issue 11, case 4: a sent week rerun in another zone used to quarantine
// every receipt. It is refused up front, naming the pinned zone.
func TestRunInAnotherZoneThanThePinIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 20)
	p := newProvider()
	f.run(f.runner(p, p, nil))
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := f.runner(p, p, func(c *run.Config) { c.Spec.Location = berlin }).Run(context.Background())
	if !errors.Is(err, run.ErrConfig) || !strings.Contains(err.Error(), "pinned to time zone UTC") ||
		!strings.Contains(err.Error(), "DIGEST_TZ=UTC") || sum.Quarantined != 0 {
		t.Fatalf("rerun in Europe/Berlin: %+v %v, want a refusal naming UTC", sum, err)
	}
	if st := f.states(); st[digest.StateQuarantined] != 0 || st[digest.StateSent] != int64(f.want) {
		t.Fatalf("states %v, want %d sent and none quarantined", st, f.want)
	}
	if acc, dups := p.totals(); acc != f.want || dups != 0 {
		t.Fatalf("provider accepted %d keys with %d duplicates", acc, dups)
	}
}

// A source without a single customer is refused before the week is
// pinned, unless an empty week is allowed.
func TestRunEmptySourceIsRefusedUnlessAllowed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 5)
	empty := filepath.Join(t.TempDir(), "empty.jsonl")
	writeSnapshot(t, empty, 0)
	src, err := snapshot.OpenFile(empty)
	if err != nil {
		t.Fatal(err)
	}
	p := newProvider()
	r := f.runner(p, p, nil)
	r.Source = src
	if _, err := r.Run(context.Background()); !errors.Is(err, run.ErrConfig) || !strings.Contains(err.Error(), "no customers at all") {
		t.Fatalf("Run = %v, want a refusal of the empty source", err)
	}
	// Not pinned: the week's first real run pins its own cutoff.
	later := f.clock.Now().Add(time.Hour)
	f.clock.Advance(time.Hour)
	wp, err := f.store.PinSnapshot(context.Background(), digest.SnapshotPin{Type: "weekly_activity", Week: runWeek, Version: "v1"},
		digest.WeekPin{AsOf: later, Zone: "UTC", KeyID: "k1"})
	if err != nil || !wp.AsOf.Equal(later) {
		t.Fatalf("the refused run pinned the week: %+v %v", wp, err)
	}
	r = f.runner(p, p, func(c *run.Config) { c.AllowEmpty = true })
	r.Source = src
	if sum, err := r.Run(context.Background()); err != nil || sum.Digests != 0 || len(p.sends) != 0 {
		t.Fatalf("allowed empty run: %+v %v", sum, err)
	}
}

// The pod's local zone is refused: another pod would compute other week
// bounds.
func TestConfigRefusesTheLocalZone(t *testing.T) {
	t.Parallel()
	cfg := run.Config{Spec: digest.Spec{Week: runWeek, Location: time.Local, Type: "weekly_activity", Version: "v1"}}
	if err := cfg.Validate(); !errors.Is(err, run.ErrConfig) || !strings.Contains(err.Error(), "time zone Local") {
		t.Fatalf("Validate() = %v, want the Local zone refused", err)
	}
}

// Pinned moves a key id to the front and keeps the others' order.
func TestKeyringPinned(t *testing.T) {
	t.Parallel()
	kr := mustKeyring(t, ring2+","+ring1)
	p, ok := kr.Pinned("k1")
	if !ok || strings.Join(p.IDs(), ",") != "k1,k2" || strings.Join(kr.IDs(), ",") != "k2,k1" {
		t.Fatalf("Pinned(k1) = %v %v (keyring now %v)", p, ok, kr)
	}
	id := digest.Identity{Customer: "c", Week: runWeek, Type: "t", Version: "v"}
	if p.Key(id) != kr.Candidates(id)[1] {
		t.Fatal("the pinned keyring's key is not the k1 candidate")
	}
	if _, ok := kr.Pinned("k3"); ok {
		t.Fatal("Pinned(k3) found a key id the keyring lacks")
	}
}
