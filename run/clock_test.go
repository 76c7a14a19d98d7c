package run_test

import (
	"context"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger/sqlite"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/snapshot"
)

// skewed opens the fixture's ledger file again with a clock skew ahead of
// the run's (behind when negative): the ledger of a database server, or a
// machine, whose clock differs from the run's.
func (f *fixture) skewed(skew time.Duration) *sqlite.Store {
	f.t.Helper()
	skewed := func() time.Time { return f.clock.Now().Add(skew) }
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: f.path, Now: skewed, LedgerNow: skewed})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { s.Close() })
	return s
}

// A ledger whose clock runs an hour ahead reports lease expiries an hour
// later by the run's clock. The run times its sends by its own clock (the
// claim's asking plus the lease), so when its first send stalls past the
// lease, it starts no other: they are given back unsent. Timed by the
// ledger's expiry, it sent them all, an hour's worth after the lease.
func TestRunTimesItsLeasesByItsOwnClock(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 12)
	p := newProvider()
	stalled := false
	p.script = func(digest.Key, int) (bool, error) {
		if !stalled {
			stalled = true
			f.clock.Advance(20 * time.Minute) // past the lease
		}
		return true, nil
	}
	// A long lease: no renewal (every quarter lease, by the real clock)
	// comes while the test runs, however loaded the machine.
	r := f.runner(p, p, func(c *run.Config) { c.Concurrency, c.BatchSize, c.Lease = 1, 100, 10*time.Minute })
	r.Ledger = f.skewed(time.Hour)
	sum := f.run(r)
	if len(p.sends) != 1 || sum.Sent != 1 || sum.Pending != f.want-1 {
		t.Fatalf("%d digests sent, summary %+v; want only the one in flight when the lease ran out, %d given back", len(p.sends), sum, f.want-1)
	}
}

// A ledger whose clock runs an hour behind reports a takeover an hour in
// the past. The look-up of a claim taken over from a crashed run whose
// send had started waits the look-up delay from the takeover by the run's
// own clock: the claim is given back for a later pass, maybe sent, not
// looked up. From the ledger's time the run asked at once, while that
// send could still be landing, and sent it again on a "not found".
func TestRunWaitsTheLookupDelayByItsOwnClock(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 12)
	ctx := context.Background()
	var reqs []digest.ClaimRequest
	for r := range snapshot.Synthetic(12, runWeek, 1) {
		d, err := digest.Build(r, digest.Spec{Week: runWeek, Location: time.UTC, Type: "weekly_activity", Version: "v1"})
		if err != nil || d.Empty() {
			continue
		}
		reqs = append(reqs, digest.ClaimRequest{Keys: f.kr.Candidates(d.Identity), Fingerprint: d.Fingerprint(), Week: runWeek, RunID: "crashed", Lease: time.Minute})
	}
	behind := f.skewed(-time.Hour)
	res, err := behind.Claim(ctx, reqs[:1])
	if err != nil || res[0].Outcome != digest.OutcomeClaimed {
		t.Fatalf("the crashed run's claim: %+v %v", res, err)
	}
	if errs, err := behind.StartSending(ctx, []digest.Fence{{Key: res[0].Key, Token: res[0].Token}}); err != nil || errs[0] != nil {
		t.Fatalf("start sending: %v %v", errs, err)
	}
	f.clock.Advance(2 * time.Minute) // the crashed run's lease expires

	p := newProvider()
	p.lookup = func(digest.Key) (bool, error) { return false, nil } // the landing send not listed yet
	r := f.runner(p, p, nil)
	r.Ledger = behind
	sum := f.run(r)
	if p.lookups != 0 || p.sends[res[0].Key] != 0 || sum.Pending != 1 || sum.Sent != len(reqs)-1 {
		t.Fatalf("%d look-ups, %d sends of the taken-over digest, summary %+v; want it given back unasked, unsent, the other %d sent",
			p.lookups, p.sends[res[0].Key], sum, len(reqs)-1)
	}
	if got, _, err := f.store.Show(ctx, res[0].Key); err != nil || got.State != digest.StateRetryable || !got.MaybeSent {
		t.Fatalf("the taken-over receipt: %+v %v; want retryable, maybe sent", got, err)
	}
}
