package ledgertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// Renew keeps held claims exclusive past their first lease, in one call;
// a claim taken over, or finished, is not renewed and says so.
func testRenewExtendsHeldLeases(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	k1, k2, k3 := keys(t, "customer_1"), keys(t, "customer_2"), keys(t, "customer_3")
	c1, c2, c3 := mustClaim(t, s, req(k1, "fp1")), mustClaim(t, s, req(k2, "fp1")), mustClaim(t, s, req(k3, "fp1"))
	if want := clk.Now().Add(time.Minute); !c1.LeaseExpires.Equal(want) || !c1.TakenOverAt.IsZero() {
		t.Fatalf("fresh claim: lease until %v (want %v), taken over at %v", c1.LeaseExpires, want, c1.TakenOverAt)
	}
	fences := []digest.Fence{{Key: c1.Key, Token: c1.Token}, {Key: c2.Key, Token: c2.Token}}

	clk.Advance(50 * time.Second)
	until, errs, err := s.Renew(ctx, fences, time.Minute)
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("renew: %v %v", err, errs)
	}
	if want := clk.Now().Add(time.Minute); !until.Equal(want) {
		t.Fatalf("renewed until %v, want %v", until, want)
	}
	// Past the first lease: the renewed claims are busy until the new
	// expiry; the one not renewed is taken over.
	clk.Advance(30 * time.Second)
	busy := claim1(t, s, req(k1, "fp1"))
	wantOutcome(t, busy, digest.OutcomeBusy)
	if !busy.NextAttempt.Equal(until) {
		t.Fatalf("busy until %v, want the renewed expiry %v", busy.NextAttempt, until)
	}
	taken := mustClaim(t, s, req(k3, "fp1"))
	_, errs, err = s.Renew(ctx, []digest.Fence{{Key: c3.Key, Token: c3.Token}, {Key: taken.Key, Token: taken.Token}}, time.Minute)
	if err != nil || !errors.Is(errs[0], digest.ErrStaleClaim) || errs[1] != nil {
		t.Fatalf("renew after a takeover: %v %v; want the old token stale, the new one renewed", err, errs)
	}
	// A finished claim is not renewed either.
	if err := finish1(t, s, digest.Finish{Key: c2.Key, Token: c2.Token, State: digest.StateSent}); err != nil {
		t.Fatal(err)
	}
	_, errs, err = s.Renew(ctx, fences, time.Minute)
	if err != nil || errs[0] != nil || !errors.Is(errs[1], digest.ErrStaleClaim) {
		t.Fatalf("renew after a finish: %v %v", err, errs)
	}
	if _, _, err := s.Renew(ctx, fences, 0); err == nil {
		t.Fatal("renew with a zero lease: no error")
	}
}

// A takeover of a claim whose send had started says when it happened, so
// that the look-up waits for a send that may still be landing; a takeover
// of a claim that never started sending does not.
func testTakeoverOfStartedSendSaysWhen(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	k1, k2 := keys(t, "customer_1"), keys(t, "customer_2")
	c1 := mustClaim(t, s, req(k1, "fp1"))
	mustClaim(t, s, req(k2, "fp1"))
	if err := start1(t, s, c1.Key, c1.Token); err != nil {
		t.Fatal(err)
	}
	clk.Advance(90 * time.Second)
	started := mustClaim(t, s, req(k1, "fp1"))
	if !started.MaybeSent || !started.TakenOverAt.Equal(clk.Now()) || !started.LeaseExpires.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("takeover of a started send: %+v; want maybe sent, taken over at %v", started, clk.Now())
	}
	unstarted := mustClaim(t, s, req(k2, "fp1"))
	if unstarted.MaybeSent || !unstarted.TakenOverAt.IsZero() {
		t.Fatalf("takeover of an unstarted claim: %+v", unstarted)
	}
}

// A renewal never waits for a row lock (the run's own mark and finish
// write the same rows concurrently, in no set order): a locked row is
// skipped and reported as not renewed, its lease unchanged.
func testRenewSkipsLockedRows(t *testing.T, be Driver) {
	s, clk, cfg := fresh(t, be)
	ctx := context.Background()
	c1, c2 := mustClaim(t, s, req(keys(t, "customer_1"), "fp1")), mustClaim(t, s, req(keys(t, "customer_2"), "fp1"))
	tx, err := be.Pool(t, cfg).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM receipts WHERE key = $1 FOR UPDATE`, string(c1.Key)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	_, errs, err := s.Renew(ctx, []digest.Fence{{Key: c1.Key, Token: c1.Token}, {Key: c2.Key, Token: c2.Token}}, time.Minute)
	if err != nil || !errors.Is(errs[0], digest.ErrNotRenewed) || errs[1] != nil {
		t.Fatalf("renew with a row locked: %v %v; want the locked one not renewed, the other renewed", err, errs)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _ := show(t, s, c1.Key); !r.LeaseExpires.Equal(c1.LeaseExpires) {
		t.Fatalf("skipped row's lease %v, want unchanged %v", r.LeaseExpires, c1.LeaseExpires)
	}
}
