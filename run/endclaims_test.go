package run_test

import (
	"context"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/snapshot"
)

// A run that crashed after claiming leaves receipts claimed; when their
// customers are then suppressed (or have nothing to send), no run claims
// them again. The next run ends them, after the lease: failed with the
// reason when the send never started, held when it may have (never closed
// as not sent), a live claim of another run untouched; nothing is sent
// to them and status no longer counts them claimed.
func TestRunEndsClaimsOfCustomersItWillNotSend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, 30)
	var active, empty []string
	for rec := range snapshot.Synthetic(30, runWeek, 1) {
		if len(rec.Activity) > 0 {
			active = append(active, rec.Customer.ID)
		} else {
			empty = append(empty, rec.Customer.ID)
		}
	}
	if len(active) < 3 || len(empty) < 1 {
		t.Fatalf("snapshot: %d active, %d empty customers; the test needs 3 and 1", len(active), len(empty))
	}
	keysOf := func(id string) []digest.Key {
		return f.kr.Candidates(digest.Identity{Customer: id, Week: runWeek, Type: "weekly_activity", Version: "v1"})
	}
	claim := func(id string) digest.ClaimResult {
		t.Helper()
		res, err := f.store.Claim(ctx, []digest.ClaimRequest{{Keys: keysOf(id), Fingerprint: "fp-crashed", Week: runWeek, RunID: "crashed", Lease: time.Minute}})
		if err != nil || res[0].Outcome != digest.OutcomeClaimed {
			t.Fatalf("claim %s: %+v %v", id, res, err)
		}
		return res[0]
	}
	// The crashed run: one claim never started, one whose send started,
	// one of a customer with nothing to send.
	idle, started, nothing := claim(active[0]), claim(active[1]), claim(empty[0])
	if errs, err := f.store.StartSending(ctx, []digest.Fence{{Key: started.Key, Token: started.Token}}); err != nil || errs[0] != nil {
		t.Fatalf("start sending: %v %v", errs, err)
	}
	for _, id := range active[:3] {
		if _, err := f.store.Suppress(ctx, ledger.Suppression{Keys: f.kr.CustomerKeys(id), Subject: digest.SubjectCustomer, Reason: digest.ReasonUnsubscribe, Source: "operator"}); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Advance(2 * time.Minute) // the crashed run's leases expire
	live := claim(active[2])         // another run's live claim

	p := newProvider()
	sum := f.run(f.runner(p, p, nil))
	if sum.EndedClaims != 3 || sum.Suppressed != 3 || sum.Unaccounted() != 0 {
		t.Fatalf("summary %+v; want 3 ended claims, 3 suppressed, every digest accounted for", sum)
	}
	want := map[digest.Key]struct {
		state  digest.State
		reason string
	}{
		idle.Key:    {digest.StateFailed, "suppressed after claim: not sent"},
		started.Key: {digest.StateHeld, "suppressed after claim: not sent"},
		nothing.Key: {digest.StateFailed, "nothing to send after claim: not sent"},
		live.Key:    {digest.StateClaimed, ""},
	}
	for k, w := range want {
		r, _, err := f.store.Show(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != w.state || r.LastError != w.reason {
			t.Errorf("%s: %s %q; want %s %q", k, r.State, r.LastError, w.state, w.reason)
		}
		if w.state == digest.StateHeld && !r.MaybeSent {
			t.Errorf("%s: held without maybe_sent: the send may have started", k)
		}
		if n := p.sends[k]; n != 0 {
			t.Errorf("%s: sent %d times, want never", k, n)
		}
	}
	if st := f.states(); st[digest.StateClaimed] != 1 {
		t.Errorf("states %v; want only the live claim claimed", st)
	}
	// A second run finds nothing more to end.
	if again := f.run(f.runner(p, p, nil)); again.EndedClaims != 0 {
		t.Errorf("second run ended %d claims, want 0", again.EndedClaims)
	}
	// Observe mode changes no receipt.
	f.clock.Advance(2 * time.Minute) // the live claim's lease expires too
	obs := f.run(f.runner(p, p, func(c *run.Config) { c.Mode = run.ModeObserve }))
	if r, _, _ := f.store.Show(ctx, live.Key); obs.EndedClaims != 0 || r.State != digest.StateClaimed {
		t.Errorf("observe run ended %d claims, live one now %s; want none, claimed", obs.EndedClaims, r.State)
	}
}
