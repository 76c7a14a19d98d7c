package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// testBatchedEqualsSingle runs one scenario twice, on two fresh databases:
// once with every step as one batched call, once one element per call.
func testBatchedEqualsSingle(t *testing.T, be Driver) {
	batched := runScenario(t, be, true)
	single := runScenario(t, be, false)
	if testing.Verbose() {
		for _, line := range batched {
			t.Log(line)
		}
	}
	if len(batched) != len(single) {
		t.Fatalf("%d results batched, %d single", len(batched), len(single))
	}
	for i := range batched {
		if batched[i] != single[i] {
			t.Errorf("step result %d: batched %q, single %q", i, batched[i], single[i])
		}
	}
}

// runScenario returns every result of the scenario as text, with tokens
// reduced to "has one".
func runScenario(t *testing.T, be Driver, batch bool) []string {
	t.Helper()
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	k := make([][]digest.Key, 6)
	for i := range k {
		k[i] = keys(t, string(rune('a'+i))+"_customer")
	}
	var out []string
	tokens := map[digest.Key]int64{}
	claim := func(reqs ...digest.ClaimRequest) {
		t.Helper()
		var res []digest.ClaimResult
		if batch {
			var err error
			if res, err = s.Claim(ctx, reqs); err != nil {
				t.Fatal(err)
			}
		} else {
			for _, r := range reqs {
				res = append(res, claim1(t, s, r))
			}
		}
		for _, r := range res {
			if r.Outcome == digest.OutcomeClaimed {
				tokens[r.Key] = r.Token
			}
			hasToken := r.Token != 0
			r.Token = 0
			out = append(out, fmtResult(r, hasToken))
		}
	}
	fence := func(fs []digest.Fence, fins []digest.Finish) {
		t.Helper()
		var errs []error
		for i := range max(len(fs), len(fins)) {
			var one []error
			var err error
			switch {
			case fs != nil && batch && i == 0:
				one, err = s.StartSending(ctx, fs)
			case fs != nil && !batch:
				one, err = s.StartSending(ctx, fs[i:i+1])
			case fins != nil && batch && i == 0:
				one, err = s.Finish(ctx, fins)
			case fins != nil && !batch:
				one, err = s.Finish(ctx, fins[i:i+1])
			}
			if err != nil {
				t.Fatal(err)
			}
			errs = append(errs, one...)
		}
		for _, err := range errs {
			out = append(out, errString(err))
		}
	}
	claim(req(k[0], "fp1"), req(k[1], "fp1"), req(k[2], "fp1"), req(k[3], "fp1"), req(k[0], "fp1"))
	fence(nil, []digest.Finish{
		{Key: k[0][0], Token: tokens[k[0][0]], State: digest.StateSent, ProviderRef: "ref-0"},
		{Key: k[1][0], Token: tokens[k[1][0]], State: digest.StateRetryable, NextAttempt: clk.Now().Add(10 * time.Minute), MaybeSent: true},
		{Key: k[2][0], Token: tokens[k[2][0]], State: digest.StateHeld},
		{Key: k[3][0], Token: tokens[k[3][0]], State: digest.StateFailed},
		{Key: k[0][0], Token: tokens[k[0][0]], State: digest.StateFailed}, // spent token
	})
	claim(req(k[0], "fp1"), req(k[1], "fp1"), req(k[2], "fp1"), req(k[3], "fp1"), req(k[4], "fp1"), req(k[0], "fp2"), req(k[5], "fp1"))
	clk.Advance(10 * time.Minute)
	claim(req(k[1], "fp1"))
	fence([]digest.Fence{{Key: k[1][0], Token: tokens[k[1][0]]}, {Key: k[4][0], Token: tokens[k[4][0]]}, {Key: k[0][0], Token: tokens[k[0][0]]}}, nil)
	clk.Advance(2 * time.Minute)
	claim(req(k[4], "fp1"), req(k[5], "fp1"), req(k[1], "fp1"))
	return out
}

func fmtResult(r digest.ClaimResult, hasToken bool) string {
	return fmt.Sprintf("%v %s attempt=%d maybe=%t token=%t ref=%s sent=%v next=%v",
		r.Outcome, r.Key, r.Attempt, r.MaybeSent, hasToken, r.ProviderRef, r.SentAt, r.NextAttempt)
}

func errString(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, digest.ErrStaleClaim):
		return "stale"
	}
	return err.Error()
}
