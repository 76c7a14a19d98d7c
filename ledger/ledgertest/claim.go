package ledgertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

func testClaimConcurrentConnections(t *testing.T, be Driver) {
	_, clk, cfg := fresh(t, be)
	const n = 32
	stores := make([]ledger.Store, n) // one store each: separate connections
	for i := range stores {
		stores[i] = open(t, be, cfg, clk)
	}
	k := keys(t, "customer_1")
	start := make(chan struct{})
	results := make([]digest.ClaimResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range stores {
		wg.Go(func() {
			<-start
			res, err := stores[i].Claim(context.Background(), []digest.ClaimRequest{req(k, "fp1")})
			if err == nil {
				results[i] = res[0]
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	won := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		switch r.Outcome {
		case digest.OutcomeClaimed:
			won++
		case digest.OutcomeBusy:
		default:
			t.Errorf("claim %d: outcome %v", i, r.Outcome)
		}
	}
	if won != 1 {
		t.Fatalf("%d claims won, want exactly 1", won)
	}
}

func testLeaseBlocksThenExpires(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	k := keys(t, "customer_1")
	first := mustClaim(t, s, req(k, "fp1"))
	if first.Attempt != 1 || first.MaybeSent || first.Token == 0 || first.Key != k[0] {
		t.Fatalf("first claim %+v", first)
	}
	busy := claim1(t, s, req(k, "fp1"))
	wantOutcome(t, busy, digest.OutcomeBusy)
	if !busy.NextAttempt.Equal(clk.Now().Add(time.Minute)) {
		t.Errorf("busy until %v, want lease expiry %v", busy.NextAttempt, clk.Now().Add(time.Minute))
	}

	clk.Advance(59 * time.Second)
	wantOutcome(t, claim1(t, s, req(k, "fp1")), digest.OutcomeBusy)

	// Send never started: taken over, not ambiguous.
	clk.Advance(time.Second)
	second := mustClaim(t, s, req(k, "fp1"))
	if second.Attempt != 2 || second.MaybeSent || second.Token == first.Token {
		t.Fatalf("takeover without send: %+v", second)
	}
	if err := start1(t, s, k[0], first.Token); !errors.Is(err, digest.ErrStaleClaim) {
		t.Fatalf("stale token started sending: %v", err)
	}
	if err := start1(t, s, k[0], second.Token); err != nil {
		t.Fatalf("start sending: %v", err)
	}

	// Send started: the next owner must look up first.
	clk.Advance(2 * time.Minute)
	third := mustClaim(t, s, req(k, "fp1"))
	if third.Attempt != 3 || !third.MaybeSent {
		t.Fatalf("takeover after send started: %+v", third)
	}
	// The mark survives a takeover of a claim that never started sending.
	clk.Advance(2 * time.Minute)
	fourth := mustClaim(t, s, req(k, "fp1"))
	if fourth.Attempt != 4 || !fourth.MaybeSent {
		t.Fatalf("second takeover: %+v", fourth)
	}
}

func testExpiredLeaseNotTakenOverMayFinish(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	k := keys(t, "customer_1")
	c := mustClaim(t, s, req(k, "fp1"))
	clk.Advance(time.Hour)
	if err := start1(t, s, k[0], c.Token); err != nil {
		t.Fatalf("start sending after expiry: %v", err)
	}
	if err := finish1(t, s, digest.Finish{Key: k[0], Token: c.Token, State: digest.StateSent, ProviderRef: "ref-1"}); err != nil {
		t.Fatalf("finish after expiry: %v", err)
	}
	wantOutcome(t, claim1(t, s, req(k, "fp1")), digest.OutcomeAlreadySent)
}

func testStaleTokenCannotFinish(t *testing.T, be Driver) {
	for _, state := range []digest.State{digest.StateSent, digest.StateRetryable, digest.StateFailed, digest.StateHeld} {
		t.Run(string(state), func(t *testing.T) {
			t.Parallel()
			s, clk, _ := fresh(t, be)
			k := keys(t, "customer_1")
			old := mustClaim(t, s, req(k, "fp1"))
			clk.Advance(2 * time.Minute)
			cur := mustClaim(t, s, req(k, "fp1"))
			err := finish1(t, s, digest.Finish{Key: k[0], Token: old.Token, State: state, ProviderRef: "stale",
				NextAttempt: clk.Now(), Reason: "stale worker"})
			if !errors.Is(err, digest.ErrStaleClaim) {
				t.Fatalf("stale finish %s: %v, want ErrStaleClaim", state, err)
			}
			r, _ := show(t, s, k[0])
			if r.State != digest.StateClaimed || r.Token != cur.Token || r.ProviderRef != "" {
				t.Fatalf("stale finish changed the row: %+v", r)
			}
			if err := finish1(t, s, digest.Finish{Key: k[0], Token: cur.Token, State: state, NextAttempt: clk.Now()}); err != nil {
				t.Fatalf("current finish: %v", err)
			}
			// Once finished, even the current token is spent.
			if err := finish1(t, s, digest.Finish{Key: k[0], Token: cur.Token, State: digest.StateSent}); !errors.Is(err, digest.ErrStaleClaim) {
				t.Fatalf("second finish: %v", err)
			}
		})
	}
}

func testSentIsFinal(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	k := keys(t, "customer_1")
	c := mustClaim(t, s, req(k, "fp1"))
	sentAt := clk.Now()
	if err := finish1(t, s, digest.Finish{Key: k[0], Token: c.Token, State: digest.StateSent, ProviderRef: "ref-1"}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{0, time.Minute, 24 * time.Hour, 365 * 24 * time.Hour} {
		clk.Advance(d)
		r := req(k, "fp1")
		r.Lease = time.Nanosecond
		got := claim1(t, s, r)
		wantOutcome(t, got, digest.OutcomeAlreadySent)
		if got.ProviderRef != "ref-1" || !got.SentAt.Equal(sentAt) || got.Key != k[0] {
			t.Fatalf("already sent: %+v", got)
		}
	}
}

func testRetryableNotDueThenDue(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	k := keys(t, "customer_1")
	c := mustClaim(t, s, req(k, "fp1"))
	next := clk.Now().Add(10 * time.Minute)
	if err := finish1(t, s, digest.Finish{Key: k[0], Token: c.Token, State: digest.StateRetryable,
		NextAttempt: next, MaybeSent: true, Reason: "421 try later"}); err != nil {
		t.Fatal(err)
	}
	got := claim1(t, s, req(k, "fp1"))
	wantOutcome(t, got, digest.OutcomeNotDue)
	if !got.NextAttempt.Equal(next) {
		t.Errorf("next attempt %v, want %v", got.NextAttempt, next)
	}
	clk.Advance(10 * time.Minute)
	again := mustClaim(t, s, req(k, "fp1"))
	if again.Attempt != 2 || !again.MaybeSent {
		t.Fatalf("due retry: %+v, want attempt 2 with MaybeSent", again)
	}
	if err := finish1(t, s, digest.Finish{Key: k[0], Token: again.Token, State: digest.StateRetryable, NextAttempt: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	if third := mustClaim(t, s, req(k, "fp1")); third.MaybeSent || third.Attempt != 3 {
		t.Fatalf("retry after a definite temporary failure: %+v, want MaybeSent false", third)
	}
}

func testFingerprintMismatchQuarantines(t *testing.T, be Driver) {
	for _, prior := range []digest.State{digest.StateClaimed, digest.StateSent, digest.StateRetryable, digest.StateFailed, digest.StateHeld} {
		t.Run(string(prior), func(t *testing.T) {
			t.Parallel()
			s, clk, _ := fresh(t, be)
			k := keys(t, "customer_1")
			c := mustClaim(t, s, req(k, "fp1"))
			if prior != digest.StateClaimed {
				if err := finish1(t, s, digest.Finish{Key: k[0], Token: c.Token, State: prior, ProviderRef: "ref-1", NextAttempt: clk.Now()}); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := show(t, s, k[0])
			wantOutcome(t, claim1(t, s, req(k, "fp2")), digest.OutcomeQuarantined)
			after, events := show(t, s, k[0])
			if after.State != digest.StateQuarantined || after.Fingerprint != "fp1" || after.ConflictFingerprint != "fp2" {
				t.Fatalf("quarantined row: %+v", after)
			}
			if !after.SentAt.Equal(before.SentAt) || after.ProviderRef != before.ProviderRef || after.Attempts != before.Attempts {
				t.Fatalf("quarantine lost the original: before %+v after %+v", before, after)
			}
			if last := events[len(events)-1]; last.From != prior || last.To != digest.StateQuarantined {
				t.Fatalf("last event %+v", last)
			}
			// Never claimable again, by either fingerprint, whenever.
			for _, fp := range []string{"fp1", "fp2", "fp3"} {
				clk.Advance(30 * 24 * time.Hour)
				wantOutcome(t, claim1(t, s, req(k, fp)), digest.OutcomeQuarantined)
			}
			if err := finish1(t, s, digest.Finish{Key: k[0], Token: c.Token, State: digest.StateSent}); !errors.Is(err, digest.ErrStaleClaim) {
				t.Fatalf("finish of a quarantined claim: %v", err)
			}
		})
	}
}

// Issue 35: a quarantine's history says which part of the digest changed
// (address, name, content), from the claims' fingerprint parts, never a
// value; without the stored parts (a receipt claimed before they were
// kept, or one released from quarantine) it says they are not recorded.
func testQuarantineSaysWhichPartChanged(t *testing.T, be Driver) {
	const (
		p1 = "address=aaaaaaaa name=bbbbbbbb content=cccccccc"
		p2 = "address=dddddddd name=bbbbbbbb content=eeeeeeee"
		p3 = "address=dddddddd name=ffffffff content=eeeeeeee"
	)
	for _, tc := range []struct {
		name            string
		stored, claimed string
		want            string
	}{
		{"address and content", p1, p2, ledger.HistoryQuarantined + "; changed: address, content"},
		{"no part", p1, p1, ledger.HistoryQuarantined + "; changed: another field"},
		{"not recorded", "", p2, ledger.HistoryQuarantined + "; which part changed is not recorded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, _, _ := fresh(t, be)
			k := keys(t, "customer_1")
			first := req(k, "fp1")
			first.Parts = tc.stored
			mustClaim(t, s, first)
			second := req(k, "fp2")
			second.Parts = tc.claimed
			wantOutcome(t, claim1(t, s, second), digest.OutcomeQuarantined)
			_, events := show(t, s, k[0])
			last := events[len(events)-1]
			if last.To != digest.StateQuarantined || last.Detail != tc.want || last.Detail != ledger.QuarantineDetail(tc.stored, tc.claimed) {
				t.Fatalf("quarantine history %q, want %q", last.Detail, tc.want)
			}
		})
	}
	t.Run("released, then quarantined again", func(t *testing.T) {
		t.Parallel()
		s, _, _ := fresh(t, be)
		k := keys(t, "customer_1")
		first, second, third := req(k, "fp1"), req(k, "fp2"), req(k, "fp3")
		first.Parts, second.Parts, third.Parts = p1, p2, p3
		mustClaim(t, s, first)
		wantOutcome(t, claim1(t, s, second), digest.OutcomeQuarantined)
		if err := s.Release(context.Background(), k[0], ledger.Action{By: "alice", Reason: "new address"}); err != nil {
			t.Fatal(err)
		}
		mustClaim(t, s, second)
		wantOutcome(t, claim1(t, s, third), digest.OutcomeQuarantined)
		_, events := show(t, s, k[0])
		if d := events[len(events)-1].Detail; d != ledger.QuarantineDetail("", p3) {
			t.Fatalf("quarantine after a release: %q, want the parts not recorded", d)
		}
	})
}

func testRotatedKeyringFindsOlderKey(t *testing.T, be Driver) {
	s, _, _ := fresh(t, be)
	old := keyring(t, "k1")
	rotated := keyring(t, "k2", "k1")
	id := identity("customer_1")
	c := mustClaim(t, s, req(old.Candidates(id), "fp1"))
	if err := finish1(t, s, digest.Finish{Key: c.Key, Token: c.Token, State: digest.StateSent, ProviderRef: "ref-1"}); err != nil {
		t.Fatal(err)
	}
	cands := rotated.Candidates(id)
	if cands[0].KeyID() != "k2" || cands[1] != c.Key {
		t.Fatalf("candidates %v", cands)
	}
	got := claim1(t, s, req(cands, "fp1"))
	wantOutcome(t, got, digest.OutcomeAlreadySent)
	if got.Key != c.Key {
		t.Fatalf("governing key %s, want the older %s", got.Key, c.Key)
	}
	if _, _, err := s.Show(context.Background(), cands[0]); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("a receipt appeared under the new key: %v", err)
	}
	// A digest never claimed before goes under the current key.
	fresh := mustClaim(t, s, req(rotated.Candidates(identity("customer_2")), "fp1"))
	if fresh.Key.KeyID() != "k2" {
		t.Fatalf("new receipt under %s, want k2", fresh.Key)
	}
	if r, _ := show(t, s, fresh.Key); r.KeyID != "k2" {
		t.Fatalf("stored key id %q", r.KeyID)
	}
}

func testInvalidRequests(t *testing.T, be Driver) {
	s, _, _ := fresh(t, be)
	k := keys(t, "customer_1")
	bad := []digest.ClaimRequest{
		{Fingerprint: "fp", Week: week, Lease: time.Minute},
		{Keys: k, Week: week, Lease: time.Minute},
		{Keys: k, Fingerprint: "fp", Week: week},
		{Keys: k, Fingerprint: "fp", Lease: time.Minute},
		{Keys: []digest.Key{"customer_1|2026-W32|weekly_activity|v3"}, Fingerprint: "fp", Week: week, Lease: time.Minute},
		{Keys: []digest.Key{k[0] + "," + k[0]}, Fingerprint: "fp", Week: week, Lease: time.Minute},
	}
	for _, r := range bad {
		if _, err := s.Claim(context.Background(), []digest.ClaimRequest{r}); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("claim %+v: %v, want ErrInvalid", r, err)
		}
	}
	if _, err := s.Observe(context.Background(), []digest.Observation{{Keys: []digest.Key{"plain"}}}); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("observe of a readable key: %v, want ErrInvalid", err)
	}
	if _, err := s.Finish(context.Background(), []digest.Finish{{Key: k[0], Token: 1, State: digest.StateClaimed}}); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("finish to claimed: %v, want ErrInvalid", err)
	}
}
