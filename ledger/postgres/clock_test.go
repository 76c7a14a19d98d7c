package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/ledger"
)

// A prune whose machine's clock runs years ahead cuts by the server's
// clock: a week a run started seconds earlier (on a machine with the right
// time) keeps its sent receipts and gets no tombstone. Its own clock's
// cutoff (Before, what "digest prune" used to send) would take them.
func TestPruneCutsByTheServersClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	// ledgerNow, set, stands in for the server's clock (a store of a
	// hundred days ago).
	open := func(now, ledgerNow func() time.Time) *Store {
		s, _ := OpenTest(t, url, Config{Now: now, LedgerNow: ledgerNow})
		return s
	}
	run := open(time.Now, nil)
	if err := run.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	week := digest.WeekOf(time.Now(), time.UTC)
	pin := digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v1"}
	if _, err := run.StartWeek(ctx, pin, time.Now()); err != nil {
		t.Fatal(err)
	}
	key := digest.Key("k1:" + strings.Repeat("ab", 32))
	sendOne(t, run, key, week)

	ahead := func() time.Time { return time.Now().Add(10 * 365 * 24 * time.Hour) }
	prune := open(ahead, nil)
	horizon := 90 * 24 * time.Hour
	for _, dry := range []bool{true, false} {
		got, err := prune.Prune(ctx, ledger.PruneRequest{OlderThan: horizon, DryRun: dry})
		if err != nil || got.Receipts != 0 {
			t.Fatalf("prune (dry %v) on a clock ten years ahead: %+v, %v; want nothing pruned", dry, got, err)
		}
	}
	if r, _, err := run.Show(ctx, key); err != nil || r.State != digest.StateSent {
		t.Fatalf("the sent receipt of the week under run: %+v, %v; want kept", r, err)
	}
	if stones, err := run.Tombstones(ctx, week); err != nil || len(stones) != 0 {
		t.Fatalf("tombstones %+v, %v; want none", stones, err)
	}
	// A week run a hundred days ago (by the right clock) is pruned by age.
	back := func() time.Time { return time.Now().Add(-100 * 24 * time.Hour) }
	long := open(back, back)
	oldWeek := digest.WeekOf(long.now(), time.UTC)
	oldKey := digest.Key("k1:" + strings.Repeat("cd", 32))
	sendOne(t, long, oldKey, oldWeek)
	if got, err := prune.Prune(ctx, ledger.PruneRequest{OlderThan: horizon}); err != nil || got.Receipts != 1 || got.Weeks[0].Week != oldWeek.String() {
		t.Fatalf("prune of a week run a hundred days ago: %+v, %v; want its receipt", got, err)
	}
	// What the process clock alone would have done.
	if got, err := prune.Prune(ctx, ledger.PruneRequest{Before: ahead().Add(-horizon), DryRun: true}); err != nil || got.Receipts != 1 {
		t.Fatalf("dry prune by the skewed clock's own cutoff: %+v, %v; want the receipt (the hazard this test guards)", got, err)
	}
	if _, _, err := run.Show(ctx, key); errors.Is(err, ledger.ErrNotFound) {
		t.Fatal("a dry run removed the receipt")
	}
}

// sendOne claims key for week and finishes it sent.
func sendOne(t *testing.T, s *Store, key digest.Key, week digest.ISOWeek) {
	t.Helper()
	ctx := context.Background()
	res, err := s.Claim(ctx, []digest.ClaimRequest{{Keys: []digest.Key{key}, Fingerprint: "fp", Week: week, RunID: "r1", Lease: time.Minute}})
	if err != nil || res[0].Outcome != digest.OutcomeClaimed {
		t.Fatalf("claim: %v %+v", err, res)
	}
	if errs, err := s.Finish(ctx, []digest.Finish{{Key: key, Token: res[0].Token, State: digest.StateSent, ProviderRef: "p", RunID: "r1", Week: week}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
}

// "migrate --down-to" from a machine whose clock runs a day ahead still
// sees a running run's lease as live: the server's clock says so. By its
// own clock alone the lease had expired, and it rolled the schema back
// under a run that was sending.
func TestRollBackSeesLiveClaimsByTheServersClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	open := func(now func() time.Time) *Store {
		s, _ := OpenTest(t, url, Config{Now: now})
		return s
	}
	run := open(time.Now)
	if err := run.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	week := digest.WeekOf(time.Now(), time.UTC)
	key := digest.Key("k1:" + strings.Repeat("ef", 32))
	if res, err := run.Claim(ctx, []digest.ClaimRequest{{Keys: []digest.Key{key}, Fingerprint: "fp", Week: week, RunID: "r1", Lease: time.Hour}}); err != nil || res[0].Outcome != digest.OutcomeClaimed {
		t.Fatalf("claim: %v %+v", err, res)
	}
	ahead := open(func() time.Time { return time.Now().Add(24 * time.Hour) })
	sc, err := ahead.Schema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ahead.MigrateDownTo(ctx, sc.Want-1); !errors.Is(err, ledger.ErrLiveClaims) {
		t.Fatalf("roll back from a clock a day ahead under a live claim: %v; want ErrLiveClaims", err)
	}
	if after, err := run.Schema(ctx); err != nil || after.Have != sc.Have {
		t.Fatalf("schema %+v, %v after the refusal; want %d, untouched", after, err, sc.Have)
	}
}
