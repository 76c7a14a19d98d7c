package ledgertest

import (
	"context"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

func endClaims(t testing.TB, s ledger.Store, customers ...string) map[digest.Key]digest.EndedClaim {
	t.Helper()
	var ends []digest.EndClaim
	for _, c := range customers {
		ends = append(ends, digest.EndClaim{Keys: keys(t, c), Week: week, Reason: "suppressed after claim", RunID: "run-2"})
	}
	ended, err := s.EndClaims(context.Background(), ends)
	if err != nil {
		t.Fatalf("end claims: %v", err)
	}
	got := map[digest.Key]digest.EndedClaim{}
	for _, e := range ended {
		got[e.Key] = e
	}
	return got
}

// A claim no run will finish (its run crashed, its customer is now
// suppressed) ends once its lease has expired: failed with the reason
// when its send never started, held when it may have (an operator looks
// it up; never closed as not sent), and a retryable receipt likewise. A
// live claim, a sent receipt and a key with no receipt are left as they
// are; each ended receipt has a history row with the reason.
func testEndClaimsOfCrashedRuns(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	idle := mustClaim(t, s, req(keys(t, "idle"), "fp1"))
	started := mustClaim(t, s, req(keys(t, "started"), "fp1"))
	if err := start1(t, s, started.Key, started.Token); err != nil {
		t.Fatal(err)
	}
	retry := mustClaim(t, s, req(keys(t, "retry"), "fp1"))
	if err := finish1(t, s, digest.Finish{Key: retry.Key, Token: retry.Token, State: digest.StateRetryable, Reason: "421", NextAttempt: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	sent := send(t, s, keys(t, "sent"), "ref-1")

	clk.Advance(30 * time.Second) // leases live: only the retryable ends
	live := mustClaim(t, s, req(keys(t, "live"), "fp1"))
	got := endClaims(t, s, "idle", "started", "retry", "sent", "live", "never")
	if len(got) != 1 || got[retry.Key].To != digest.StateFailed || got[retry.Key].From != digest.StateRetryable {
		t.Fatalf("ended under live leases: %+v; want only the retryable one, failed", got)
	}

	clk.Advance(45 * time.Second) // the first claims' leases have expired, live's has not
	got = endClaims(t, s, "idle", "started", "retry", "sent", "live", "never")
	want := map[digest.Key]digest.State{idle.Key: digest.StateFailed, started.Key: digest.StateHeld}
	if len(got) != len(want) {
		t.Fatalf("ended %+v; want %v", got, want)
	}
	for k, st := range want {
		e := got[k]
		if e.From != digest.StateClaimed || e.To != st {
			t.Fatalf("%s ended %+v; want claimed -> %s", k, e, st)
		}
		r, events := show(t, s, k)
		if r.State != st || r.LastError != "suppressed after claim" || !r.LeaseExpires.IsZero() {
			t.Fatalf("%s: %+v; want %s with the reason and no lease", k, r, st)
		}
		if st == digest.StateHeld && !r.MaybeSent {
			t.Fatalf("%s: a started send ended held without maybe_sent: %+v", k, r)
		}
		last := events[len(events)-1]
		if last.To != st || last.Detail != "suppressed after claim" {
			t.Fatalf("%s: last event %+v; want to %s with the reason", k, last, st)
		}
	}
	for k, st := range map[digest.Key]digest.State{sent.Key: digest.StateSent, live.Key: digest.StateClaimed} {
		if r, _ := show(t, s, k); r.State != st {
			t.Fatalf("%s: %s; want %s untouched", k, r.State, st)
		}
	}
	if _, _, err := s.Show(context.Background(), keys(t, "never")[0]); err == nil {
		t.Fatal("a key with no receipt got one")
	}
	// The crashed run's token cannot finish the ended claim.
	if err := finish1(t, s, digest.Finish{Key: idle.Key, Token: idle.Token, State: digest.StateSent, ProviderRef: "late"}); err == nil {
		t.Fatal("the crashed run's token finished an ended claim")
	}
	c, err := s.Counts(context.Background(), week)
	if err != nil {
		t.Fatal(err)
	}
	if c.ByState[digest.StateClaimed] != 1 {
		t.Fatalf("counts %+v; want only the live claim claimed", c.ByState)
	}
}
