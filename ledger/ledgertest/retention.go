package ledgertest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// old is how far the clock moves so that every receipt made before it is
// older than any cutoff a prune could be given.
const old = 1000 * 24 * time.Hour

// pinOf is the snapshot pin of the test identities (see identity).
func pinOf(w digest.ISOWeek, version string) digest.SnapshotPin {
	return digest.SnapshotPin{Type: "weekly_activity", Week: w, Version: version}
}

func mustPrune(t *testing.T, s ledger.Store, p ledger.PruneRequest) ledger.PruneResult {
	t.Helper()
	res, err := s.Prune(context.Background(), p)
	if err != nil {
		t.Fatalf("prune: %v", err)
	}
	return res
}

func tombstones(t *testing.T, s ledger.Store, w digest.ISOWeek) []digest.PruneTombstone {
	t.Helper()
	list, err := s.Tombstones(context.Background(), w)
	if err != nil {
		t.Fatalf("tombstones: %v", err)
	}
	return list
}

func startWeek(t *testing.T, s ledger.Store, pin digest.SnapshotPin, at time.Time) *digest.PruneTombstone {
	t.Helper()
	stone, err := s.StartWeek(context.Background(), pin, at)
	if err != nil {
		t.Fatalf("start week: %v", err)
	}
	return stone
}

// Claimed (sending or not), retryable (maybe-sent or not) receipts are live
// evidence: no prune removes them, whatever their age and whatever it
// includes; it ends them (see testPruneEndsClaimsNoRunFinishes), and a
// later prune deletes the failed ones, never the held. Settled ones go.
func testPruneKeepsLiveReceiptsWhateverTheirAge(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	claimed, sending := keys(t, "claimed"), keys(t, "sending")
	retryable, maybeSent := keys(t, "retryable"), keys(t, "maybe_sent")
	sent, failed, held, quarantined := keys(t, "sent"), keys(t, "failed"), keys(t, "held"), keys(t, "quarantined")

	mustClaim(t, s, req(claimed, "fp1"))
	c := mustClaim(t, s, req(sending, "fp1"))
	if err := start1(t, s, c.Key, c.Token); err != nil {
		t.Fatal(err)
	}
	c = mustClaim(t, s, req(retryable, "fp1"))
	finish1(t, s, digest.Finish{Key: c.Key, Token: c.Token, State: digest.StateRetryable, NextAttempt: clk.Now().Add(time.Hour)})
	c = mustClaim(t, s, req(maybeSent, "fp1"))
	start1(t, s, c.Key, c.Token)
	finish1(t, s, digest.Finish{Key: c.Key, Token: c.Token, State: digest.StateRetryable, NextAttempt: clk.Now().Add(time.Hour), MaybeSent: true})
	send(t, s, sent, "ref-1")
	c = mustClaim(t, s, req(failed, "fp1"))
	finish1(t, s, digest.Finish{Key: c.Key, Token: c.Token, State: digest.StateFailed, Reason: "550"})
	hold(t, s, held)
	mustClaim(t, s, req(quarantined, "fp1"))
	claim1(t, s, req(quarantined, "fp2"))

	clk.Advance(old)
	all := ledger.PruneRequest{Before: clk.Now(), IncludeHeld: true, IncludeQuarantined: true}
	if res := mustPrune(t, s, all); res.Receipts != 4 {
		t.Fatalf("pruned %+v, want the 4 settled receipts", res)
	}
	for _, k := range [][]digest.Key{claimed, sending, retryable, maybeSent} {
		if _, ev := show(t, s, k[0]); len(ev) == 0 {
			t.Errorf("%s lost its history", k[0])
		}
	}
	for _, k := range [][]digest.Key{sent, failed, held, quarantined} {
		if _, _, err := s.Show(ctx, k[0]); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("%s: %v, want pruned", k[0], err)
		}
	}
	// The prune ended them instead: those whose send may have started
	// held, still maybe sent, the others failed.
	for k, st := range map[digest.Key]digest.State{claimed[0]: digest.StateFailed, sending[0]: digest.StateHeld,
		retryable[0]: digest.StateFailed, maybeSent[0]: digest.StateHeld} {
		if r, _ := show(t, s, k); r.State != st || st == digest.StateHeld && !r.MaybeSent {
			t.Errorf("%s: %+v; want %s", k, r, st)
		}
	}
	// A later prune deletes the failed ones and keeps the held ones.
	clk.Advance(time.Hour)
	if res := mustPrune(t, s, ledger.PruneRequest{Before: clk.Now().Add(old)}); res.Receipts != 2 || res.ClaimsEnded != 0 {
		t.Fatalf("second prune: %+v, want the 2 failed receipts", res)
	}
	for _, k := range [][]digest.Key{sending, maybeSent} {
		if r, _ := show(t, s, k[0]); r.State != digest.StateHeld || !r.MaybeSent {
			t.Errorf("%s: %+v; want kept held, maybe sent", k[0], r)
		}
	}
}

// A prune first ends the claims no run will finish, the way a run ends a
// suppressed customer's (digest.ClaimEnder): receipts last updated before
// its cutoff, of a week no run started since, claimed with the lease
// expired by the ledger's clock or retryable. One whose send may have
// started ends held and maybe sent, never closed as not sent; the others
// failed with the prune's reason; each with a history row. A live claim,
// a week under run and a dry run change nothing. The ended receipts are
// not deleted by the prune that ends them; a later one deletes the failed.
func testPruneEndsClaimsNoRunFinishes(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
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

	clk.Advance(old)
	startWeek(t, s, pinOf(week, "v1"), clk.Now())
	if res := mustPrune(t, s, ledger.PruneRequest{Before: clk.Now().Add(-time.Hour)}); res.ClaimsEnded != 0 || res.Receipts != 0 {
		t.Fatalf("prune of a week under run: %+v, want nothing ended or pruned", res)
	}
	clk.Advance(2 * time.Hour)
	live := mustClaim(t, s, req(keys(t, "live"), "fp1")) // updated before the cutoff, its lease live
	cutoff := clk.Now().Add(time.Second)
	clk.Advance(2 * time.Second) // what the prune ends is stamped after its cutoff, as with any real one
	if res := mustPrune(t, s, ledger.PruneRequest{Before: cutoff, DryRun: true}); res.ClaimsEnded != 3 || res.Receipts != 1 {
		t.Fatalf("dry run: %+v, want 3 claims to end and 1 receipt to prune", res)
	}
	if r, _ := show(t, s, idle.Key); r.State != digest.StateClaimed {
		t.Fatalf("a dry run ended %+v", r)
	}
	res := mustPrune(t, s, ledger.PruneRequest{Before: cutoff})
	if res.ClaimsEnded != 3 || res.ClaimsHeld != 1 || res.Receipts != 1 {
		t.Fatalf("prune: %+v, want 3 claims ended (1 held) and the sent receipt pruned", res)
	}
	if _, _, err := s.Show(ctx, sent.Key); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("sent receipt: %v, want pruned", err)
	}
	for k, st := range map[digest.Key]digest.State{idle.Key: digest.StateFailed, started.Key: digest.StateHeld, retry.Key: digest.StateFailed} {
		r, events := show(t, s, k)
		if r.State != st || r.LastError != ledger.PruneEndReason || !r.LeaseExpires.IsZero() || st == digest.StateHeld && !r.MaybeSent {
			t.Fatalf("%s: %+v; want %s with the prune's reason", k, r, st)
		}
		if last := events[len(events)-1]; last.To != st || last.Detail != ledger.PruneEndReason {
			t.Fatalf("%s: last event %+v; want to %s with the prune's reason", k, last, st)
		}
	}
	if r, _ := show(t, s, live.Key); r.State != digest.StateClaimed {
		t.Fatalf("live claim: %+v; want untouched", r)
	}
	// The crashed run's token cannot finish an ended claim.
	if err := finish1(t, s, digest.Finish{Key: idle.Key, Token: idle.Token, State: digest.StateSent, ProviderRef: "late"}); err == nil {
		t.Fatal("the crashed run's token finished a claim the prune ended")
	}
	c, err := s.Counts(ctx, week)
	if err != nil {
		t.Fatal(err)
	}
	if c.ByState[digest.StateClaimed] != 1 || c.ByState[digest.StateHeld] != 1 || c.ByState[digest.StateFailed] != 2 {
		t.Fatalf("counts %+v; want the live claim claimed, 1 held, 2 failed", c.ByState)
	}
	// A later prune deletes the failed ones, keeps the held one, and ends
	// the claim whose lease has since run out.
	clk.Advance(old)
	if res := mustPrune(t, s, ledger.PruneRequest{Before: clk.Now()}); res.Receipts != 2 || res.ClaimsEnded != 1 {
		t.Fatalf("later prune: %+v, want the 2 failed pruned and the expired claim ended", res)
	}
	if r, _ := show(t, s, started.Key); r.State != digest.StateHeld {
		t.Fatalf("held receipt: %+v; want kept", r)
	}
}

// A run of an old week (a backfill) that starts after a prune listed the
// week's stale claims and before it ends them keeps them: the ending checks
// the week's runs again, in its own transaction. A week no run started
// since, listed in the same page, ends as before.
func testPruneEndsNoClaimOfWeekStartedAfterListing(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	ender, ok := s.(ledger.StaleClaimEnder)
	if !ok {
		t.Fatalf("%T is not a ledger.StaleClaimEnder", s)
	}
	retry := mustClaim(t, s, req(keys(t, "retry"), "fp1"))
	if err := finish1(t, s, digest.Finish{Key: retry.Key, Token: retry.Token, State: digest.StateRetryable, Reason: "421", NextAttempt: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	idle := mustClaim(t, s, req(keys(t, "idle"), "fp1"))
	other := week.Next()
	r := req(keyring(t, "k1").Candidates(digest.Identity{Customer: "other_week", Week: other, Type: "weekly_activity", Version: "v1"}), "fp1")
	r.Week = other
	elsewhere := mustClaim(t, s, r)

	clk.Advance(old)
	cutoff := clk.Now().Add(-time.Hour)
	page, err := ender.StaleClaims(ctx, cutoff, "", 10)
	if err != nil || len(page) != 3 {
		t.Fatalf("stale claims: %+v, %v; want 3", page, err)
	}
	startWeek(t, s, pinOf(week, "v1"), clk.Now()) // the backfill of week
	ended, err := ender.EndStaleClaims(ctx, cutoff, ledger.PruneEnds(page))
	if err != nil {
		t.Fatal(err)
	}
	if len(ended) != 1 || ended[0].Key != elsewhere.Key || ended[0].To != digest.StateFailed {
		t.Fatalf("ended %+v; want only %s, of the week no run started, failed", ended, elsewhere.Key)
	}
	for k, st := range map[digest.Key]digest.State{retry.Key: digest.StateRetryable, idle.Key: digest.StateClaimed} {
		if r, _ := show(t, s, k); r.State != st || r.LastError == ledger.PruneEndReason {
			t.Fatalf("%s: %+v; want left %s for the backfill", k, r, st)
		}
	}
	// The backfill retries the retryable receipt.
	c := mustClaim(t, s, req(keys(t, "retry"), "fp1"))
	if c.Key != retry.Key {
		t.Fatalf("backfill claimed %s; want %s", c.Key, retry.Key)
	}
}

// A prune leaves a tombstone per pin of each week it took receipts from,
// even some of them (one standing for every type and version when the week
// has no pin); a dry run leaves none; later prunes add to it and never
// remove it; a run's start returns it.
func testPruneLeavesTombstones(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	unpinned := week.Next()
	for _, v := range []string{"v3", "v4"} {
		if _, err := s.PinSnapshot(ctx, pinOf(week, v), digest.WeekPin{AsOf: clk.Now(), Zone: "UTC", KeyID: "k1"}); err != nil {
			t.Fatal(err)
		}
	}
	t0 := clk.Now()
	send(t, s, keys(t, "early"), "ref-1")
	r := req(keyring(t, "k1").Candidates(digest.Identity{Customer: "other_week", Week: unpinned, Type: "weekly_activity", Version: "v3"}), "fp1")
	r.Week = unpinned
	c := mustClaim(t, s, r)
	finish1(t, s, digest.Finish{Key: c.Key, Token: c.Token, State: digest.StateSent})
	clk.Advance(time.Hour)
	send(t, s, keys(t, "late"), "ref-2")
	clk.Advance(old)

	dry := mustPrune(t, s, ledger.PruneRequest{Before: clk.Now(), DryRun: true})
	if dry.Receipts != 3 || len(dry.Weeks) != 2 {
		t.Fatalf("dry run %+v, want 3 receipts in 2 weeks", dry)
	}
	if got := tombstones(t, s, digest.ISOWeek{}); len(got) != 0 {
		t.Fatalf("dry run left tombstones %+v", got)
	}

	// Some of the week: the cutoff takes only its earlier receipt.
	first := clk.Now()
	res := mustPrune(t, s, ledger.PruneRequest{Before: t0.Add(30 * time.Minute)})
	want := []ledger.PrunedWeek{{Week: week.String(), Receipts: 1}, {Week: unpinned.String(), Receipts: 1}}
	// Whether a week went by DELETE or with its partition (PostgreSQL's
	// store) is the store's business: not compared.
	weeks := slices.Clone(res.Weeks)
	for i := range weeks {
		weeks[i].Dropped = false
	}
	if res.Receipts != 2 || len(weeks) != 2 || weeks[0] != want[0] || weeks[1] != want[1] {
		t.Fatalf("partial prune %+v, want %+v", res, want)
	}
	clk.Advance(time.Hour)
	if res := mustPrune(t, s, ledger.PruneRequest{Before: clk.Now()}); res.Receipts != 1 {
		t.Fatalf("second prune %+v, want the late receipt", res)
	}
	last := clk.Now()
	mustPrune(t, s, ledger.PruneRequest{Before: clk.Now()}) // nothing left: the tombstones stay as they are

	got := tombstones(t, s, digest.ISOWeek{})
	if len(got) != 3 {
		t.Fatalf("tombstones %+v, want 3", got)
	}
	if g := got[0]; g.Pin != (digest.SnapshotPin{Week: unpinned}) || g.ReceiptsPruned != 1 {
		t.Errorf("newest week first, for every type and version: %+v", g)
	}
	for i, v := range []string{"v3", "v4"} {
		g := got[i+1]
		if g.Pin != pinOf(week, v) || g.ReceiptsPruned != 2 || !g.FirstPrunedAt.Equal(first) || !g.LastPrunedAt.Equal(last) {
			t.Errorf("tombstone %+v, want %v with 2 receipts pruned at %v then %v", g, pinOf(week, v), first, last)
		}
	}
	if only := tombstones(t, s, week); len(only) != 2 {
		t.Errorf("tombstones of %s: %+v", week, only)
	}

	if stone := startWeek(t, s, pinOf(week, "v3"), clk.Now()); stone == nil || *stone != got[1] {
		t.Errorf("run start of a pruned pin: %+v, want %+v", stone, got[1])
	}
	if stone := startWeek(t, s, pinOf(week, "v5"), clk.Now()); stone != nil {
		t.Errorf("a version never pinned before the prune lost nothing: %+v", stone)
	}
	if stone := startWeek(t, s, digest.SnapshotPin{Type: "other", Week: unpinned, Version: "v9"}, clk.Now()); stone == nil || stone.ReceiptsPruned != 1 {
		t.Errorf("a week pruned with no pin refuses every type: %+v", stone)
	}
	if stone := startWeek(t, s, pinOf(unpinned.Next(), "v3"), clk.Now()); stone != nil {
		t.Errorf("a week never pruned: %+v", stone)
	}
}

// A week whose run started at or after the cutoff keeps every receipt: a
// backfill of an old week must not see its receipts vanish mid-run. A
// start before the cutoff protects nothing. The first cutoff is an age
// before the ledger's clock, as "digest prune" asks.
func testPruneKeepsAWeekUnderRun(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	send(t, s, keys(t, "a"), "ref-1")
	send(t, s, keys(t, "b"), "ref-2")
	clk.Advance(old)
	horizon := 90 * 24 * time.Hour
	if stone := startWeek(t, s, pinOf(week, "v9"), clk.Now()); stone != nil {
		t.Fatalf("start: %+v", stone)
	}
	if res := mustPrune(t, s, ledger.PruneRequest{OlderThan: horizon}); res.Receipts != 0 {
		t.Fatalf("pruned a week under run: %+v", res)
	}
	if got := tombstones(t, s, digest.ISOWeek{}); len(got) != 0 {
		t.Fatalf("tombstones %+v", got)
	}
	clk.Advance(horizon + time.Hour)
	// Before, the caller's cutoff: PostgreSQL's store cuts an age by the
	// earlier of the server's clock and this fake one, now ahead of it.
	if res := mustPrune(t, s, ledger.PruneRequest{Before: clk.Now().Add(-horizon)}); res.Receipts != 2 {
		t.Fatalf("a run started before the cutoff still protects: %+v", res)
	}
}

func testPruneRefusesNoCutoff(t *testing.T, be Driver) {
	s, _, _ := fresh(t, be)
	if _, err := s.Prune(context.Background(), ledger.PruneRequest{}); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("prune without a cutoff: %v, want ErrInvalid", err)
	}
	both := ledger.PruneRequest{OlderThan: time.Hour, Before: time.Now()}
	if _, err := s.Prune(context.Background(), both); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("prune with an age and a time: %v, want ErrInvalid", err)
	}
}

// waitForLockWait returns once some backend waits for a lock on week_runs.
// It polls pg_locks: the waiter is another goroutine's statement, blocked
// inside PostgreSQL, with no signal of its own to wait on.
func waitForLockWait(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); <-tick.C {
		var waiting int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
WHERE NOT granted AND relation = 'week_runs'::regclass`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
	}
	t.Fatal("nobody waited for week_runs")
}

// PostgreSQL: a prune and a run's start on the same week never cross.
// A run starting while a prune holds its lock waits and then sees the
// tombstone; a prune starting while a run records its start waits and
// then keeps the week.
func testPruneAndRunStartDoNotCrossPostgres(t *testing.T, be Driver) {
	ctx := context.Background()
	t.Run("prune first", func(t *testing.T) {
		t.Parallel()
		s, clk, cfg := fresh(t, be)
		pool := be.Pool(t, cfg)
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		// What Prune does first, then the tombstone it writes.
		if _, err := tx.Exec(ctx, `LOCK TABLE week_runs IN SHARE MODE`); err != nil {
			t.Fatal(err)
		}
		done := make(chan *digest.PruneTombstone)
		go func() {
			stone, err := s.StartWeek(ctx, pinOf(week, "v3"), clk.Now())
			if err != nil {
				t.Error(err)
			}
			done <- stone
		}()
		waitForLockWait(t, pool)
		_, err = tx.Exec(ctx, `INSERT INTO prune_tombstones VALUES ('weekly_activity', $1, 'v3', 7, $2, $2)`, week.String(), clk.Now())
		if err == nil {
			err = tx.Commit(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		if stone := <-done; stone == nil || stone.ReceiptsPruned != 7 {
			t.Fatalf("run start after a concurrent prune: %+v, want its tombstone", stone)
		}
	})
	t.Run("run first", func(t *testing.T) {
		t.Parallel()
		s, clk, cfg := fresh(t, be)
		send(t, s, keys(t, "a"), "ref-1")
		clk.Advance(old)
		pool := be.Pool(t, cfg)
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		// What StartWeek does first.
		if _, err := tx.Exec(ctx, `INSERT INTO week_runs VALUES ('weekly_activity', $1, 'v3', $2)`, week.String(), clk.Now()); err != nil {
			t.Fatal(err)
		}
		done := make(chan ledger.PruneResult)
		go func() {
			res, err := s.Prune(ctx, ledger.PruneRequest{Before: clk.Now().Add(-time.Hour)})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		waitForLockWait(t, pool)
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if res := <-done; res.Receipts != 0 {
			t.Fatalf("prune after a concurrent run start: %+v, want the week kept", res)
		}
	})
}

// PostgreSQL: the ending of a prune's stale claims and a run's start on
// the same week never cross. Listed before a run of the week records its
// start, the claims are not ended by an ending that starts while that
// start is under way: it waits for it and then keeps the week's receipts.
func testPruneEndingWaitsForRunStartPostgres(t *testing.T, be Driver) {
	ctx := context.Background()
	s, clk, cfg := fresh(t, be)
	ender, ok := s.(ledger.StaleClaimEnder)
	if !ok {
		t.Fatalf("%T is not a ledger.StaleClaimEnder", s)
	}
	idle := mustClaim(t, s, req(keys(t, "idle"), "fp1"))
	clk.Advance(old)
	cutoff := clk.Now().Add(-time.Hour)
	page, err := ender.StaleClaims(ctx, cutoff, "", 10)
	if err != nil || len(page) != 1 {
		t.Fatalf("stale claims: %+v, %v; want 1", page, err)
	}
	pool := be.Pool(t, cfg)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// What StartWeek does first.
	if _, err := tx.Exec(ctx, `INSERT INTO week_runs VALUES ('weekly_activity', $1, 'v3', $2)`, week.String(), clk.Now()); err != nil {
		t.Fatal(err)
	}
	done := make(chan []digest.EndedClaim)
	go func() {
		ended, err := ender.EndStaleClaims(ctx, cutoff, ledger.PruneEnds(page))
		if err != nil {
			t.Error(err)
		}
		done <- ended
	}()
	waitForLockWait(t, pool)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if ended := <-done; len(ended) != 0 {
		t.Fatalf("ended %+v after a concurrent run start; want none", ended)
	}
	if r, _ := show(t, s, idle.Key); r.State != digest.StateClaimed {
		t.Fatalf("%+v; want left claimed for the run", r)
	}
}
