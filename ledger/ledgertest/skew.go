package ledgertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// skew is how far the skewed processes' clocks are off: far more than
// any lease, so that a decision by a process clock would show.
const skew = 3 * time.Hour

// openSkewed opens a store on cfg whose process clock is off by offset
// and whose ledger's clock is the database's own (as every command
// opens it).
func openSkewed(t *testing.T, d Driver, cfg Database, offset time.Duration) ledger.Store {
	t.Helper()
	return openWith(t, d, cfg, Clocks{Now: func() time.Time { return time.Now().Add(offset) }})
}

// Leases and retries are decided by the ledger's clock: processes whose
// clocks run hours ahead or behind can neither take over a live claim nor
// keep an expired one, renew from the ledger's time, and schedule retries
// as delays. The times a store returns are on its caller's clock.
func testSkewedClocksDecideNothing(t *testing.T, d Driver) {
	ctx := context.Background()
	cfg := d.Fresh(t)
	right := openSkewed(t, d, cfg, 0)
	if err := right.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ahead, behind := openSkewed(t, d, cfg, skew), openSkewed(t, d, cfg, -skew)
	// The week of the real date: any week works, this one reads well.
	weekReq := func(customer string, lease time.Duration) digest.ClaimRequest {
		r := req(keys(t, customer), "fp1")
		r.Lease = lease
		return r
	}

	// A claim by a process behind is live for its lease: a process ahead
	// cannot take it over, before or after the holder renews it.
	before := time.Now().Add(-skew)
	held := mustClaim(t, behind, weekReq("customer_1", time.Minute))
	after := time.Now().Add(-skew)
	if held.LeaseExpires.Before(before.Add(time.Minute)) || held.LeaseExpires.After(after.Add(time.Minute)) {
		t.Fatalf("lease until %v on the holder's clock; want a minute after its call, %v to %v", held.LeaseExpires, before, after)
	}
	busy := claim1(t, ahead, weekReq("customer_1", time.Minute))
	wantOutcome(t, busy, digest.OutcomeBusy)
	if now := time.Now().Add(skew); busy.NextAttempt.Before(now) || busy.NextAttempt.After(now.Add(time.Minute)) {
		t.Fatalf("busy until %v on the clock ahead (now %v); want within the minute's lease", busy.NextAttempt, now)
	}
	if _, errs, err := behind.Renew(ctx, []digest.Fence{{Key: held.Key, Token: held.Token}}, time.Minute); err != nil || errs[0] != nil {
		t.Fatalf("renew by the holder behind: %v %v", err, errs)
	}
	wantOutcome(t, claim1(t, ahead, weekReq("customer_1", time.Minute)), digest.OutcomeBusy)
	wantOutcome(t, claim1(t, right, weekReq("customer_1", time.Minute)), digest.OutcomeBusy)
	if err := finish1(t, behind, digest.Finish{Key: held.Key, Token: held.Token, State: digest.StateSent, ProviderRef: "p1", Week: week}); err != nil {
		t.Fatalf("finish by the holder behind: %v", err)
	}

	// A claim by a process ahead ends when its lease ends by the ledger's
	// clock: a process behind takes it over then, and the old holder's
	// token no longer finishes it.
	short := 300 * time.Millisecond
	lost := mustClaim(t, ahead, weekReq("customer_2", short))
	var taken digest.ClaimResult
	for deadline := time.Now().Add(30 * time.Second); ; {
		if taken = claim1(t, behind, weekReq("customer_2", time.Minute)); taken.Outcome == digest.OutcomeClaimed {
			break
		}
		wantOutcome(t, taken, digest.OutcomeBusy)
		if time.Now().After(deadline) {
			t.Fatalf("a claim of a %v lease by a clock %v ahead was still busy after 30s: %+v", short, skew, taken)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := finish1(t, ahead, digest.Finish{Key: lost.Key, Token: lost.Token, State: digest.StateSent, ProviderRef: "p2", Week: week}); !errors.Is(err, digest.ErrStaleClaim) {
		t.Fatalf("finish of a claim taken over, by the clock ahead: %v; want ErrStaleClaim", err)
	}
	if err := finish1(t, behind, digest.Finish{Key: taken.Key, Token: taken.Token, State: digest.StateSent, ProviderRef: "p2", Week: week}); err != nil {
		t.Fatal(err)
	}

	// A retry a minute away on a skewed clock is a minute away on the
	// ledger's: not due for the others, and reported on their clocks.
	for i, s := range []ledger.Store{ahead, behind} {
		customer := []string{"customer_3", "customer_4"}[i]
		c := mustClaim(t, s, weekReq(customer, time.Minute))
		next := map[ledger.Store]time.Duration{ahead: skew, behind: -skew}[s]
		f := digest.Finish{Key: c.Key, Token: c.Token, State: digest.StateRetryable, Reason: "421", Week: week,
			NextAttempt: time.Now().Add(next).Add(time.Minute)}
		if err := finish1(t, s, f); err != nil {
			t.Fatal(err)
		}
		notDue := claim1(t, right, weekReq(customer, time.Minute))
		wantOutcome(t, notDue, digest.OutcomeNotDue)
		if now := time.Now(); notDue.NextAttempt.Before(now) || notDue.NextAttempt.After(now.Add(time.Minute)) {
			t.Fatalf("retry set a minute ahead on a clock %v off: due %v, now %v; want within the minute", next, notDue.NextAttempt, now)
		}
	}
}
