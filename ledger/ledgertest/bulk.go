package ledgertest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// scriptedLookup answers look-ups from a map; keys in fail give an error.
// The provider side is pure logic here (e2e/review_test.go asks Mailpit).
type scriptedLookup struct {
	found map[digest.Key]string
	fail  map[digest.Key]bool
}

func (l scriptedLookup) Lookup(_ context.Context, k digest.Key) (string, bool, error) {
	if l.fail[k] {
		return "", false, errors.New("provider unavailable")
	}
	ref, ok := l.found[k]
	return ref, ok, nil
}

func testBulkActionsOnOneWeek(t *testing.T, be Driver) {
	s, _, _ := fresh(t, be)
	ctx := context.Background()
	var held []digest.Key
	for _, c := range []string{"c1", "c2", "c3", "c4", "c5"} {
		k := keys(t, c)
		hold(t, s, k)
		held = append(held, k[0])
	}
	other := digest.ClaimRequest{Keys: keys(t, "c9"), Fingerprint: "fp1", Week: digest.ISOWeek{Year: 2026, Week: 33}, RunID: "r", Lease: time.Minute}
	c := mustClaim(t, s, other)
	finish1(t, s, digest.Finish{Key: c.Key, Token: c.Token, State: digest.StateHeld, Reason: "x"})

	l := scriptedLookup{found: map[digest.Key]string{held[0]: "ref-0", held[1]: "ref-1"}, fail: map[digest.Key]bool{held[2]: true}}
	res, err := ledger.MarkSentFromProvider(ctx, s, week, l, op)
	if err != nil {
		t.Fatal(err)
	}
	if res != (ledger.BulkResult{Done: 2, NotFound: 2, Errors: 1}) {
		t.Fatalf("mark-sent from provider: %+v", res)
	}
	r, events := show(t, s, held[0])
	if r.State != digest.StateSent || r.ProviderRef != "ref-0" || !strings.Contains(events[len(events)-1].Detail, op.Reason) {
		t.Fatalf("marked receipt: %+v, last event %+v", r, events[len(events)-1])
	}

	// Held receipts may have reached the provider: without a look-up
	// nothing is released, unless the operator accepts duplicates.
	res, err = ledger.ReleaseWeek(ctx, s, week, digest.StateHeld, nil, false, op)
	if err != nil || res != (ledger.BulkResult{Refused: 3}) {
		t.Fatalf("release week without a look-up: %+v, %v; want 3 refused", res, err)
	}
	for _, k := range held[2:] {
		if r, _ := show(t, s, k); r.State != digest.StateHeld {
			t.Errorf("%s: %s after a refused release, want held", k, r.State)
		}
	}
	// With one: found is marked sent, not found released, a look-up that
	// could not tell refused.
	l = scriptedLookup{found: map[digest.Key]string{held[3]: "ref-3"}, fail: map[digest.Key]bool{held[2]: true}}
	res, err = ledger.ReleaseWeek(ctx, s, week, digest.StateHeld, l, false, op)
	if err != nil || res != (ledger.BulkResult{Done: 1, MarkedSent: 1, Refused: 1, Errors: 1}) {
		t.Fatalf("release week with a look-up: %+v, %v; want 1 released, 1 marked sent, 1 refused", res, err)
	}
	if r, _ := show(t, s, held[3]); r.State != digest.StateSent || r.ProviderRef != "ref-3" {
		t.Errorf("found by the release's look-up: %s %q, want sent ref-3", r.State, r.ProviderRef)
	}
	if r, _ := show(t, s, held[4]); r.State != digest.StateRetryable || r.MaybeSent {
		t.Errorf("not found by the release's look-up: %s maybe sent %v, want retryable", r.State, r.MaybeSent)
	}
	if r, _ := show(t, s, held[2]); r.State != digest.StateHeld {
		t.Errorf("look-up failed: %s, want still held", r.State)
	}
	res, err = ledger.ReleaseWeek(ctx, s, week, digest.StateHeld, l, true, op)
	if err != nil || res != (ledger.BulkResult{Done: 1, Errors: 1}) {
		t.Fatalf("release week accepting duplicates: %+v, %v; want 1 released", res, err)
	}
	r, events = show(t, s, held[2])
	if r.State != digest.StateRetryable || !strings.Contains(events[len(events)-1].Detail, "duplicates accepted") {
		t.Errorf("released accepting duplicates: %s, last event %+v", r.State, events[len(events)-1])
	}
	if _, _, err := ledger.ReleaseWithEvidence(ctx, s, held[0], nil, true, op); !errors.Is(err, ledger.ErrWrongState) {
		t.Errorf("release of a sent receipt: %v, want ErrWrongState", err)
	}
	if r, _ := show(t, s, c.Key); r.State != digest.StateHeld {
		t.Errorf("another week's receipt: %s, want still held", r.State)
	}
	if _, err := ledger.ReleaseWeek(ctx, s, week, digest.StateSent, nil, false, op); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("release of sent receipts: %v, want ErrInvalid", err)
	}
	if _, err := ledger.ReleaseWeek(ctx, s, digest.ISOWeek{}, digest.StateHeld, nil, false, op); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("release without a week: %v, want ErrInvalid", err)
	}
}

// The time a send started survives a takeover: it is the window on-call
// searches the provider in.
func testSendStartedAtSurvivesTakeover(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	k := keys(t, "c1")
	c := mustClaim(t, s, req(k, "fp1"))
	started := clk.Now()
	if err := start1(t, s, c.Key, c.Token); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	c = mustClaim(t, s, req(k, "fp1")) // the lease expired: taken over
	if !c.MaybeSent {
		t.Fatal("takeover after a send started must be maybe-sent")
	}
	r, _ := show(t, s, c.Key)
	if !r.SendStartedAt.Equal(started) {
		t.Fatalf("send started at %v after the takeover, want %v", r.SendStartedAt, started)
	}
	finish1(t, s, digest.Finish{Key: c.Key, Token: c.Token, State: digest.StateHeld, Reason: "lookup inconclusive"})
	if r, _ := show(t, s, c.Key); !r.SendStartedAt.Equal(started) {
		t.Fatalf("send started at %v once held, want %v", r.SendStartedAt, started)
	}
}
