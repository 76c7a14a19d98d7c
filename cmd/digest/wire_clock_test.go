package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// The ledger a command opens returns its times (a lease's end) on the
// command's clock, Env.Now, the clock a run schedules its passes and
// retries by: here seven hours ahead of the machine's, whose clock the
// embedded ledger decides by. Converted to the machine's clock instead, a
// retry's due time would lie seven hours in the run's past, and its retry
// passes would come back at once, pass after pass.
func TestLedgerReturnsTimesOnTheCommandsClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ahead := time.Now().Add(7 * time.Hour).UTC().Truncate(time.Second)
	env := &Env{Now: func() time.Time { return ahead }}
	lc := ledgerConfig{LedgerPath: filepath.Join(t.TempDir(), "digest.db")}
	store, err := openLedger(ctx, env, lc, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	res, err := store.Claim(ctx, []digest.ClaimRequest{{Keys: []digest.Key{"k1:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}, Fingerprint: "fp",
		Week: digest.ISOWeek{Year: 2026, Week: 48}, RunID: "r1", Lease: time.Hour}})
	if err != nil || res[0].Outcome != digest.OutcomeClaimed {
		t.Fatalf("claim: %v %+v", err, res)
	}
	// The lease ends an hour after the call by the command's clock; the
	// ledger's own time of the call may differ by the call's duration.
	if got := res[0].LeaseExpires.Sub(ahead); got < 59*time.Minute || got > time.Hour {
		t.Fatalf("lease ends %v, %s after the command's now %v; want an hour after it", res[0].LeaseExpires, got, ahead)
	}
}
