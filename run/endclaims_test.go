package run_test

import (
	"context"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/sqlite"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/snapshot"
)

// customersOf splits the fixture's n synthetic customers into those with
// activity and those with nothing to send, and fails t unless there are at
// least active and empty of them.
func customersOf(t *testing.T, n, active, empty int) (withActivity, without []string) {
	t.Helper()
	for rec := range snapshot.Synthetic(n, runWeek, 1) {
		if len(rec.Activity) > 0 {
			withActivity = append(withActivity, rec.Customer.ID)
		} else {
			without = append(without, rec.Customer.ID)
		}
	}
	if len(withActivity) < active || len(without) < empty {
		t.Fatalf("snapshot: %d active, %d empty customers; the test needs %d and %d", len(withActivity), len(without), active, empty)
	}
	return withActivity, without
}

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
	active, empty := customersOf(t, 30, 3, 1)
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

// A crashed run's claims of customers since deleted from the source (or
// out of the week: the week's source no longer has them) are never read
// again, so no run would end them. The next run of the whole week, its
// pin the week's only one, ends them after the lease: failed with the
// reason, held when the send may have started, a retryable one failed,
// a live claim untouched; a present customer's claim is taken over and
// sent once; nothing goes to the absent ones.
func TestRunEndsClaimsOfCustomersNotInTheSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, 30)
	var present, presentFP string
	for rec := range snapshot.Synthetic(30, runWeek, 1) {
		if len(rec.Activity) > 0 {
			d, err := digest.Build(rec, digest.Spec{Week: runWeek, Location: time.UTC, Type: "weekly_activity", Version: "v1"})
			if err != nil {
				t.Fatal(err)
			}
			present, presentFP = rec.Customer.ID, d.Fingerprint()
			break
		}
	}
	keysOf := func(id string) []digest.Key {
		return f.kr.Candidates(digest.Identity{Customer: id, Week: runWeek, Type: "weekly_activity", Version: "v1"})
	}
	claim := func(id string) digest.ClaimResult {
		t.Helper()
		fp := "fp-crashed"
		if id == present {
			fp = presentFP
		}
		res, err := f.store.Claim(ctx, []digest.ClaimRequest{{Keys: keysOf(id), Fingerprint: fp, Week: runWeek, RunID: "crashed", Lease: time.Minute}})
		if err != nil || res[0].Outcome != digest.OutcomeClaimed {
			t.Fatalf("claim %s: %+v %v", id, res, err)
		}
		return res[0]
	}
	// The crashed run, before the customers left the source.
	idle, started, again, mine := claim("deleted_1"), claim("deleted_2"), claim("deleted_3"), claim(present)
	if errs, err := f.store.StartSending(ctx, []digest.Fence{{Key: started.Key, Token: started.Token}}); err != nil || errs[0] != nil {
		t.Fatalf("start sending: %v %v", errs, err)
	}
	fin := digest.Finish{Key: again.Key, Token: again.Token, State: digest.StateRetryable, NextAttempt: f.clock.Now(), Reason: "421", RunID: "crashed", Week: runWeek}
	if errs, err := f.store.Finish(ctx, []digest.Finish{fin}); err != nil || errs[0] != nil {
		t.Fatalf("finish retryable: %v %v", errs, err)
	}
	f.clock.Advance(2 * time.Minute) // the crashed run's leases expire
	live := claim("deleted_4")       // another run's live claim

	// Runs that cannot know every customer of the week leave them: a shard,
	// or a week with another content version pinned.
	p := newProvider()
	if sum := f.run(f.runner(p, p, func(c *run.Config) { c.Shard = digest.Shard{Index: 0, Count: 2} })); sum.EndedClaims != 0 {
		t.Fatalf("a shard's run ended %d claims; it cannot tell an absent customer from another shard's", sum.EndedClaims)
	}
	other := digest.SnapshotPin{Type: "weekly_activity", Week: runWeek, Version: "v0"}
	g := newFixture(t, 30)
	g.clock.Advance(f.clock.Now().Sub(g.clock.Now()))
	for _, id := range []string{"deleted_1"} {
		if res, err := g.store.Claim(ctx, []digest.ClaimRequest{{Keys: keysOf(id), Fingerprint: "fp", Week: runWeek, RunID: "crashed", Lease: time.Second}}); err != nil || res[0].Outcome != digest.OutcomeClaimed {
			t.Fatalf("claim: %+v %v", res, err)
		}
	}
	if _, err := g.store.PinSnapshot(ctx, other, digest.WeekPin{AsOf: run.Cutoff(runWeek, time.UTC, run.DefaultSettle), Zone: "UTC", KeyID: "k1"}); err != nil {
		t.Fatal(err)
	}
	g.clock.Advance(time.Minute)
	// The v0 receipt is in flight, so the run of v1 is refused unless
	// asked to resend the week as a new version (issue 35).
	resend := func(c *run.Config) {
		c.ResendAsNewVersion = &run.ResendAsNewVersion{By: "test", Reason: "v0 and v1 both go out this week"}
	}
	if sum := g.run(g.runner(newProvider(), nil, resend)); sum.EndedClaims != 0 {
		t.Fatalf("a run of a week with another version pinned ended %d claims; a key of v0 would look absent", sum.EndedClaims)
	}

	sum := f.run(f.runner(p, p, nil))
	if sum.EndedClaims != 3 || sum.Unaccounted() != 0 {
		t.Fatalf("summary %+v; want 3 ended claims, every digest accounted for", sum)
	}
	reason := "customer not in the week's source after claim: not sent"
	want := map[digest.Key]struct {
		state  digest.State
		reason string
	}{
		idle.Key:    {digest.StateFailed, reason},
		started.Key: {digest.StateHeld, reason},
		again.Key:   {digest.StateFailed, reason},
		live.Key:    {digest.StateClaimed, ""},
		mine.Key:    {digest.StateSent, ""},
	}
	for k, w := range want {
		r, _, err := f.store.Show(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != w.state || w.reason != "" && r.LastError != w.reason {
			t.Errorf("%s: %s %q; want %s %q", k, r.State, r.LastError, w.state, w.reason)
		}
		if w.state == digest.StateHeld && !r.MaybeSent {
			t.Errorf("%s: held without maybe_sent: the send may have started", k)
		}
		if n, wantN := p.sends[k], map[bool]int{true: 1}[k == mine.Key]; n != wantN {
			t.Errorf("%s: sent %d times, want %d", k, n, wantN)
		}
	}
	if _, dups := p.totals(); dups != 0 {
		t.Errorf("%d duplicates", dups)
	}
	if again := f.run(f.runner(p, p, nil)); again.EndedClaims != 0 {
		t.Errorf("second run ended %d claims, want 0", again.EndedClaims)
	}
}

// endCanceller is the fixture's ledger whose EndClaims is where the run is
// interrupted: it cancels the run's context (SIGTERM) and fails as a
// canceled ledger call does.
type endCanceller struct {
	*sqlite.Store
	cancel context.CancelFunc
	calls  int
}

func (l *endCanceller) EndClaims(ctx context.Context, ends []digest.EndClaim) ([]digest.EndedClaim, error) {
	l.calls++
	l.cancel()
	return nil, ctx.Err()
}

// A run interrupted while it ends a crashed run's claims reports what it
// left (interrupted, exit "incomplete"), not a failure: the claims stay
// for the next run to end.
func TestRunInterruptedWhileEndingClaimsIsIncomplete(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 30)
	var active string
	for rec := range snapshot.Synthetic(30, runWeek, 1) {
		if len(rec.Activity) > 0 {
			active = rec.Customer.ID
			break
		}
	}
	ctx := context.Background()
	keys := f.kr.Candidates(digest.Identity{Customer: active, Week: runWeek, Type: "weekly_activity", Version: "v1"})
	res, err := f.store.Claim(ctx, []digest.ClaimRequest{{Keys: keys, Fingerprint: "fp-crashed", Week: runWeek, RunID: "crashed", Lease: time.Minute}})
	if err != nil || res[0].Outcome != digest.OutcomeClaimed {
		t.Fatalf("claim: %+v %v", res, err)
	}
	if _, err := f.store.Suppress(ctx, ledger.Suppression{Keys: f.kr.CustomerKeys(active), Subject: digest.SubjectCustomer, Reason: digest.ReasonUnsubscribe, Source: "operator"}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Minute) // the crashed run's lease expires

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	l := &endCanceller{Store: f.store, cancel: cancel}
	p := newProvider()
	r := f.runner(p, p, nil)
	r.Ledger = l
	sum, err := r.Run(runCtx)
	if err != nil {
		t.Fatalf("run interrupted while ending claims: %v; want no error, the run incomplete", err)
	}
	if l.calls == 0 || !sum.Interrupted || sum.Complete() {
		t.Fatalf("EndClaims called %d times, summary %+v; want it called and the run interrupted", l.calls, sum)
	}
	if r, _, err := f.store.Show(ctx, res[0].Key); err != nil || r.State != digest.StateClaimed {
		t.Fatalf("the crashed run's claim: %+v %v; want it left claimed for the next run", r, err)
	}
}

// endCounter is the fixture's ledger with its EndClaims calls counted.
type endCounter struct {
	*sqlite.Store
	calls, keys int
}

func (l *endCounter) EndClaims(ctx context.Context, ends []digest.EndClaim) ([]digest.EndedClaim, error) {
	l.calls++
	l.keys += len(ends)
	return l.Store.EndClaims(ctx, ends)
}

// A week with no claimed or retryable receipt has nothing EndClaims could
// end: its first run asks for no end, however many of its customers are
// suppressed or have nothing to send (each would cost the ledger a
// probe). Once a crashed run leaves a claim, the next run asks again and
// ends it.
func TestRunOfAWeekWithNothingUnfinishedAsksNoEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, 30)
	active, empty := customersOf(t, 30, 2, 2)
	if _, err := f.store.Suppress(ctx, ledger.Suppression{Keys: f.kr.CustomerKeys(active[0]), Subject: digest.SubjectCustomer, Reason: digest.ReasonUnsubscribe, Source: "operator"}); err != nil {
		t.Fatal(err)
	}
	p := newProvider()
	l := &endCounter{Store: f.store}
	r := f.runner(p, p, nil)
	r.Ledger = l
	sum := f.run(r)
	if l.calls != 0 || sum.Suppressed != 1 || sum.Sent != f.want-1 || !sum.Complete() {
		t.Fatalf("EndClaims called %d times (%d keys), summary %+v; want none called, 1 suppressed, %d sent", l.calls, l.keys, sum, f.want-1)
	}

	// A crashed run claims a customer with nothing to send; after its
	// lease the next run asks again and ends that claim.
	keys := f.kr.Candidates(digest.Identity{Customer: empty[1], Week: runWeek, Type: "weekly_activity", Version: "v1"})
	res, err := f.store.Claim(ctx, []digest.ClaimRequest{{Keys: keys, Fingerprint: "fp-crashed", Week: runWeek, RunID: "crashed", Lease: time.Minute}})
	if err != nil || res[0].Outcome != digest.OutcomeClaimed {
		t.Fatalf("claim: %+v %v", res, err)
	}
	f.clock.Advance(2 * time.Minute)
	l.calls, l.keys = 0, 0
	r = f.runner(p, p, nil)
	r.Ledger = l
	sum = f.run(r)
	if l.calls == 0 || sum.EndedClaims != 1 {
		t.Fatalf("EndClaims called %d times, summary %+v; want it called and the crashed claim ended", l.calls, sum)
	}
	if rc, _, err := f.store.Show(ctx, res[0].Key); err != nil || rc.State != digest.StateFailed {
		t.Fatalf("the crashed run's claim: %+v %v; want it failed", rc, err)
	}
}
