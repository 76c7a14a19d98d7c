package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// One StartSending call over a fresh claim, a claim whose receipt had an
// earlier start (claimed again after a retryable finish) and a lost claim:
// the fresh start marks the first, the full one the second, with the
// earlier start's history row, and tells the third lost. No fence is
// marked twice, none missed.
func TestStartSendingFreshAndEarlier(t *testing.T) {
	t.Parallel()
	s, clk := openPartitioned(t)
	startWeek(t, s, w32)
	ctx := context.Background()
	claim := func(name string) digest.ClaimResult {
		t.Helper()
		res, err := s.Claim(ctx, []digest.ClaimRequest{{Keys: []digest.Key{testKey(name)}, Fingerprint: "fp", Week: w32, RunID: "run", Lease: time.Minute}})
		if err != nil || res[0].Outcome != digest.OutcomeClaimed {
			t.Fatalf("claim %s: %+v %v", name, res, err)
		}
		return res[0]
	}
	// earlier: started, then retryable (its send failed before the
	// provider took it), then claimed again.
	first := claim("earlier")
	if errs, err := s.StartSending(ctx, []digest.Fence{{Key: first.Key, Token: first.Token, Week: w32}}); err != nil || errs[0] != nil {
		t.Fatalf("first start: %v %v", err, errs)
	}
	firstStart := clk.Now()
	if errs, err := s.Finish(ctx, []digest.Finish{{Key: first.Key, Token: first.Token, State: digest.StateRetryable, Reason: "421",
		RunID: "run", Week: w32, NextAttempt: clk.Now()}}); err != nil || errs[0] != nil {
		t.Fatalf("finish retryable: %v %v", err, errs)
	}
	clk.Advance(time.Second)
	again := claim("earlier")
	fresh := claim("fresh")
	lost := claim("lost")
	clk.Advance(time.Second)
	errs, err := s.StartSending(ctx, []digest.Fence{
		{Key: fresh.Key, Token: fresh.Token, Week: w32},
		{Key: again.Key, Token: again.Token, Week: w32},
		{Key: lost.Key, Token: lost.Token + 1000, Week: w32},
	})
	if err != nil || errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], digest.ErrStaleClaim) {
		t.Fatalf("start: %v %v; want nil, nil, ErrStaleClaim", err, errs)
	}
	for _, c := range []digest.ClaimResult{fresh, again} {
		r, _, err := s.Show(ctx, c.Key)
		if err != nil || !r.SendStarted || !r.SendStartedAt.Equal(clk.Now()) {
			t.Fatalf("%s: %+v %v; want send started now", c.Key, r, err)
		}
	}
	if r, _, _ := s.Show(ctx, lost.Key); r.SendStarted {
		t.Fatalf("the lost claim was marked: %+v", r)
	}
	_, events, err := s.Show(ctx, again.Key)
	if err != nil {
		t.Fatal(err)
	}
	var earlierRows int
	for _, e := range events {
		if e.Detail == ledger.HistorySendStarted && !e.FromReceipt && e.At.Equal(firstStart) {
			earlierRows++
		}
	}
	if earlierRows != 1 {
		t.Fatalf("history of %s: %+v; want one row for the earlier start at %v", again.Key, events, firstStart)
	}
}
