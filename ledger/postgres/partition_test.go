package postgres

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/internal/rules"
)

// The tests of the week partitions of receipts (migration 00006,
// partition.go, the drop in retention.go). The contract suite (TestLedger)
// runs on the partitioned schema too.

var (
	w31 = digest.ISOWeek{Year: 2026, Week: 31}
	w32 = digest.ISOWeek{Year: 2026, Week: 32}
	w33 = digest.ISOWeek{Year: 2026, Week: 33}
)

// partClock is the store's clock: a fixed time that tests move on.
type partClock struct {
	base time.Time
	skew atomic.Int64 // nanoseconds added to base
}

func (c *partClock) Now() time.Time          { return c.base.Add(time.Duration(c.skew.Load())) }
func (c *partClock) Advance(d time.Duration) { c.skew.Add(int64(d)) }

// openPartitioned opens a migrated store on a schema of its own.
func openPartitioned(t *testing.T) (*Store, *partClock) {
	t.Helper()
	clk := &partClock{base: time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)} // 2026-W10
	s, _ := OpenTest(t, pgtest.Schema(t), Config{Now: clk.Now, LedgerNow: clk.Now})
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, clk
}

func tableExists(t *testing.T, s *Store, name string) bool {
	t.Helper()
	ok, _, err := s.partitionExists(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// partitionOf names the partition holding key's receipt.
func partitionOf(t *testing.T, s *Store, key digest.Key) string {
	t.Helper()
	var name string
	err := s.pool.QueryRow(context.Background(), `SELECT tableoid::regclass::text FROM receipts WHERE key = $1`, string(key)).Scan(&name)
	if err != nil {
		t.Fatalf("partition of %s: %v", key, err)
	}
	return name
}

// claimN claims n new keys of week (named by week, prefix and their
// number) in one call and returns the results.
func claimN(t *testing.T, s *Store, week digest.ISOWeek, prefix string, n int) []digest.ClaimResult {
	t.Helper()
	reqs := make([]digest.ClaimRequest, n)
	for i := range reqs {
		reqs[i] = digest.ClaimRequest{Keys: []digest.Key{testKey(fmt.Sprintf("%s%s%d", week, prefix, i))}, Fingerprint: "fp",
			Week: week, RunID: "run", Lease: time.Minute}
	}
	res, err := s.Claim(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// claimSend claims n keys of week, marks them started and finishes them
// in state, all with the week on the fences; it returns the keys.
func claimSend(t *testing.T, s *Store, week digest.ISOWeek, prefix string, n int, state digest.State) []digest.Key {
	t.Helper()
	ctx := context.Background()
	res := claimN(t, s, week, prefix, n)
	keys := make([]digest.Key, n)
	var fences []digest.Fence
	var fins []digest.Finish
	for i, r := range res {
		if r.Outcome != digest.OutcomeClaimed {
			t.Fatalf("claim %s: %v", r.Key, r.Outcome)
		}
		keys[i] = r.Key
		fences = append(fences, digest.Fence{Key: r.Key, Token: r.Token, Week: week})
		f := digest.Finish{Key: r.Key, Token: r.Token, State: state, RunID: "run", Week: week, Reason: "test"}
		switch state {
		case digest.StateSent:
			f.ProviderRef, f.Reason = "ref", ""
		case digest.StateRetryable:
			f.NextAttempt = s.now().Add(time.Hour)
		case digest.StateClaimed:
			continue
		}
		fins = append(fins, f)
	}
	errs, err := s.StartSending(ctx, fences)
	if err != nil || errors.Join(errs...) != nil {
		t.Fatalf("start sending: %v %v", err, errs)
	}
	if len(fins) > 0 {
		errs, err = s.Finish(ctx, fins)
		if err != nil || errors.Join(errs...) != nil {
			t.Fatalf("finish: %v %v", err, errs)
		}
	}
	return keys
}

// testKey is a well-formed key ("k1:" and 64 hex digits) named by s.
func testKey(s string) digest.Key { return keyOf("k1", s) }

func startWeek(t *testing.T, s *Store, week digest.ISOWeek) *digest.PruneTombstone {
	t.Helper()
	stone, err := s.StartWeek(context.Background(), digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v3"}, s.now())
	if err != nil {
		t.Fatal(err)
	}
	return stone
}

func TestRunStartCreatesTheWeeksPartition(t *testing.T) {
	t.Parallel()
	s, _ := openPartitioned(t)
	if tableExists(t, s, "receipts_2026_w32") {
		t.Fatal("receipts_2026_w32 exists before any run of the week")
	}
	startWeek(t, s, w32)
	keys := claimSend(t, s, w32, "a", 3, digest.StateSent)
	if got := partitionOf(t, s, keys[0]); got != "receipts_2026_w32" {
		t.Errorf("receipt in %s, want receipts_2026_w32", got)
	}
	// A week no run started (its partition was never created) lands in
	// the DEFAULT partition: a claim never fails for lack of one.
	keys = claimSend(t, s, w33, "b", 2, digest.StateSent)
	if got := partitionOf(t, s, keys[0]); got != defaultPartition {
		t.Errorf("receipt of a week without partition in %s, want %s", got, defaultPartition)
	}
	// Its partition can no longer be created (PostgreSQL would refuse it):
	// the week stays in the DEFAULT partition and the run goes on.
	out, err := s.ensurePartition(context.Background(), w33)
	if err != nil || out != partitionDefault {
		t.Fatalf("ensure a week the DEFAULT partition holds: %q, %v; want %q", out, err, partitionDefault)
	}
	startWeek(t, s, w33)
	claimSend(t, s, w33, "c", 2, digest.StateSent)
	if tableExists(t, s, "receipts_2026_w33") {
		t.Error("receipts_2026_w33 created although the DEFAULT partition holds rows of the week")
	}
	// Migrate creates the weeks around now ahead (the clock: 2026-W10).
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"receipts_2026_w09", "receipts_2026_w10", "receipts_2026_w11"} {
		if !tableExists(t, s, name) {
			t.Errorf("%s missing after migrate", name)
		}
	}
}

// Two runs of the same week starting together both go on, and the week
// has one partition.
func TestConcurrentPartitionCreation(t *testing.T) {
	t.Parallel()
	s, _ := openPartitioned(t)
	for _, week := range []digest.ISOWeek{w31, w32, w33} {
		var wg sync.WaitGroup
		outs := make([]partitionOutcome, 4)
		errs := make([]error, 4)
		for i := range outs {
			wg.Go(func() { outs[i], errs[i] = s.ensurePartition(context.Background(), week) })
		}
		wg.Wait()
		// IF NOT EXISTS makes a loser that checked after the winner's
		// commit succeed too ("created"); one that checked before fails on
		// the name, which ensurePartition takes for "existed".
		for i := range outs {
			if errs[i] != nil {
				t.Fatalf("%s: concurrent ensure %d: %v", week, i, errs[i])
			}
			if outs[i] != partitionCreated && outs[i] != partitionExisted {
				t.Errorf("%s: concurrent ensure %d: %q", week, i, outs[i])
			}
		}
		if !tableExists(t, s, weekPartition(week)) {
			t.Errorf("%s: no partition", week)
		}
	}
}

// A role that does not own receipts (the job role of docs/security.md)
// creates no partition and drops none: its runs use the partitions the
// owner made and the DEFAULT partition, its prunes delete row by row.
func TestPartitionsUnderTheJobRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &partClock{base: time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)}
	schemaURL := pgtest.Schema(t)
	owner, _ := OpenTest(t, schemaURL, Config{Now: clk.Now, LedgerNow: clk.Now})
	if err := owner.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var schema string
	if err := owner.pool.QueryRow(ctx, queries.Get("CurrentSchema")).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	role := fmt.Sprintf("digest_job_%d", time.Now().UnixNano())
	ident, sch := pgx.Identifier{role}.Sanitize(), pgx.Identifier{schema}.Sanitize()
	for _, stmt := range []string{
		"CREATE ROLE " + ident + " LOGIN",
		"GRANT USAGE ON SCHEMA " + sch + " TO " + ident,
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE ON %[1]s.receipts, %[1]s.receipt_events, %[1]s.snapshot_pins, "+
			"%[1]s.observations, %[1]s.prune_tombstones, %[1]s.week_runs, %[1]s.run_ends, %[1]s.week_expectations, "+
			"%[1]s.week_state_counts TO %[2]s", sch, ident),
		"GRANT USAGE ON ALL SEQUENCES IN SCHEMA " + sch + " TO " + ident,
	} {
		if _, err := owner.pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		owner.pool.Exec(context.Background(), "DROP OWNED BY "+ident)
		owner.pool.Exec(context.Background(), "DROP ROLE "+ident)
	})
	u, err := url.Parse(schemaURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	job, _ := OpenTest(t, u.String(), Config{Now: clk.Now, LedgerNow: clk.Now})

	if out, err := job.ensurePartition(ctx, w32); err != nil || out != partitionNotAllow {
		t.Fatalf("ensure under the job role: %q, %v; want %q", out, err, partitionNotAllow)
	}
	startWeek(t, job, w32)
	keys := claimSend(t, job, w32, "j", 2, digest.StateSent)
	if got := partitionOf(t, owner, keys[0]); got != defaultPartition {
		t.Errorf("the job role's receipt of a week without partition in %s, want %s", got, defaultPartition)
	}
	startWeek(t, owner, w31) // the owner (digest migrate) made this one
	keys = claimSend(t, job, w31, "j", 2, digest.StateSent)
	if got := partitionOf(t, owner, keys[0]); got != "receipts_2026_w31" {
		t.Errorf("the job role's receipt in %s, want receipts_2026_w31", got)
	}
	// The owner made 2026-W31's partition after the job role's grants: it
	// has receipts' SELECT and UPDATE grants, and the job role's send mark
	// goes to it. 2026-W12's, made ahead by the migration before the
	// grants, has none: the mark goes through receipts.
	if v, _ := job.leaves.Load(w31.String()); !strings.Contains(fmt.Sprint(v), `UPDATE "receipts_2026_w31" r`) || strings.Contains(fmt.Sprint(v), "UPDATE receipts r") {
		t.Errorf("the job role's start statement for 2026-W31 is %q; want it aimed at receipts_2026_w31", v)
	}
	w12 := digest.ISOWeek{Year: 2026, Week: 12}
	if !tableExists(t, owner, "receipts_2026_w12") {
		t.Fatal("the migration made no partition for 2026-W12")
	}
	claimSend(t, job, w12, "j", 2, digest.StateSent)
	if v, _ := job.leaves.Load(w12.String()); v != (weekStarts{fresh: startFreshSQL, full: startSQL}) {
		t.Errorf("the job role's start statements for 2026-W12 are %+v; want receipts': it may not update the partition", v)
	}
	clk.Advance(60 * 24 * time.Hour)
	got := pruneOld(t, job, ledger.PruneRequest{})
	want := []ledger.PrunedWeek{{Week: "2026-W12", Receipts: 2}, {Week: "2026-W31", Receipts: 2}, {Week: "2026-W32", Receipts: 2}}
	if fmt.Sprint(got.Weeks) != fmt.Sprint(want) {
		t.Errorf("prune under the job role: %v, want %v (deleted, not dropped)", got.Weeks, want)
	}
	if !tableExists(t, owner, "receipts_2026_w31") {
		t.Error("the job role dropped a partition")
	}
}

// Every hot-path statement with the week reaches one partition: the other
// partitions' indexes and heaps are never read.
func TestHotPathReachesOnePartition(t *testing.T) {
	t.Parallel()
	s, _ := openPartitioned(t)
	for _, w := range []digest.ISOWeek{w31, w32, w33} {
		startWeek(t, s, w)
	}
	ctx := context.Background()
	scans := func() map[string]int64 {
		if _, err := s.pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		rows, err := s.pool.Query(ctx, `SELECT relname::text, coalesce(seq_scan, 0) + coalesce(idx_scan, 0)
			FROM pg_stat_user_tables WHERE relid IN (SELECT relid FROM pg_partition_tree('receipts') WHERE isleaf)`)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int64{}
		var name string
		var n int64
		if _, err := pgx.ForEachRow(rows, []any{&name, &n}, func() error { m[name] = n; return nil }); err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := scans()
	// Batches of one (the generic plans of the single-key forms) and of
	// many (custom plans), the renewal of both.
	for _, n := range []int{1, 5} {
		keys := claimSend(t, s, w32, fmt.Sprint("n", n), n, digest.StateClaimed)
		fences := make([]digest.Fence, len(keys))
		for i, k := range keys {
			r, _, err := s.Show(ctx, k) // Show reads every partition: before the count below
			if err != nil {
				t.Fatal(err)
			}
			fences[i] = digest.Fence{Key: k, Token: r.Token, Week: w32}
		}
		before = scans()
		if _, errs, err := s.Renew(ctx, fences, time.Minute); err != nil || errors.Join(errs...) != nil {
			t.Fatalf("renew: %v %v", err, errs)
		}
		fins := make([]digest.Finish, len(keys))
		for i, f := range fences {
			fins[i] = digest.Finish{Key: f.Key, Token: f.Token, State: digest.StateSent, ProviderRef: "ref", RunID: "run", Week: w32}
		}
		if errs, err := s.Finish(ctx, fins); err != nil || errors.Join(errs...) != nil {
			t.Fatalf("finish: %v %v", err, errs)
		}
		claimSend(t, s, w32, fmt.Sprint("m", n), n, digest.StateSent)
	}
	after := scans()
	for name, n := range after {
		if name != "receipts_2026_w32" && n != before[name] {
			t.Errorf("%s read %d times by claims, marks, renewals and finishes of 2026-W32", name, n-before[name])
		}
	}
	if after["receipts_2026_w32"] == before["receipts_2026_w32"] {
		t.Error("receipts_2026_w32 never read: the count is broken")
	}
}

// A fence with the wrong week matches nothing (the claim is reported
// lost, never sent under); one with no week finds its receipt.
func TestFenceWeek(t *testing.T) {
	t.Parallel()
	s, _ := openPartitioned(t)
	startWeek(t, s, w32)
	ctx := context.Background()
	res, err := s.Claim(ctx, []digest.ClaimRequest{{Keys: []digest.Key{testKey("x")}, Fingerprint: "fp", Week: w32, RunID: "r", Lease: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	tok := res[0].Token
	errs, err := s.StartSending(ctx, []digest.Fence{{Key: testKey("x"), Token: tok, Week: w33}})
	if err != nil || !errors.Is(errs[0], digest.ErrStaleClaim) {
		t.Fatalf("start with the wrong week: %v %v, want ErrStaleClaim", err, errs)
	}
	errs, err = s.StartSending(ctx, []digest.Fence{{Key: testKey("x"), Token: tok}})
	if err != nil || errs[0] != nil {
		t.Fatalf("start without a week: %v %v", err, errs)
	}
	errs, err = s.Finish(ctx, []digest.Finish{{Key: testKey("x"), Token: tok, State: digest.StateSent, ProviderRef: "p", RunID: "r"}})
	if err != nil || errs[0] != nil {
		t.Fatalf("finish without a week: %v %v", err, errs)
	}
}

func pruneOld(t *testing.T, s *Store, p ledger.PruneRequest) ledger.PruneResult {
	t.Helper()
	p.Before = s.now().Add(-24 * time.Hour)
	res, err := s.Prune(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestPruneDropsASettledWeeksPartition(t *testing.T) {
	t.Parallel()
	s, clk := openPartitioned(t)
	ctx := context.Background()
	for _, w := range []digest.ISOWeek{w31, w32, w33} {
		startWeek(t, s, w)
	}
	sent := claimSend(t, s, w31, "s", 3, digest.StateSent)
	claimSend(t, s, w31, "f", 1, digest.StateFailed)
	// Some history to go with them: a failure retried, then sent.
	retried := claimSend(t, s, w31, "r", 1, digest.StateRetryable)
	clk.Advance(2 * time.Hour)
	res, err := s.Claim(ctx, []digest.ClaimRequest{{Keys: retried, Fingerprint: "fp", Week: w31, RunID: "r2", Lease: time.Minute}})
	if err != nil || res[0].Outcome != digest.OutcomeClaimed {
		t.Fatalf("claim again: %v %+v", err, res)
	}
	if errs, err := s.Finish(ctx, []digest.Finish{{Key: retried[0], Token: res[0].Token, State: digest.StateSent, ProviderRef: "p", RunID: "r2", Week: w31}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	// 2026-W32: a live claim; 2026-W33: a held receipt.
	claimSend(t, s, w32, "s", 2, digest.StateSent)
	live := claimSend(t, s, w32, "c", 1, digest.StateClaimed)
	claimSend(t, s, w33, "s", 2, digest.StateSent)
	held := claimSend(t, s, w33, "h", 1, digest.StateHeld)
	clk.Advance(60 * 24 * time.Hour)

	dry := pruneOld(t, s, ledger.PruneRequest{DryRun: true})
	want := []ledger.PrunedWeek{{Week: "2026-W31", Receipts: 5, Dropped: true}, {Week: "2026-W32", Receipts: 2}, {Week: "2026-W33", Receipts: 2}}
	if fmt.Sprint(dry.Weeks) != fmt.Sprint(want) {
		t.Errorf("dry run: %v, want %v", dry.Weeks, want)
	}
	if !tableExists(t, s, "receipts_2026_w31") {
		t.Fatal("a dry run dropped a partition")
	}
	got := pruneOld(t, s, ledger.PruneRequest{})
	if fmt.Sprint(got.Weeks) != fmt.Sprint(want) || got.Receipts != 9 {
		t.Errorf("prune: %+v, want %v", got, want)
	}
	if tableExists(t, s, "receipts_2026_w31") {
		t.Error("receipts_2026_w31 still exists: a fully settled week is dropped whole")
	}
	var events int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM receipt_events WHERE key = ANY($1)`, rules.KeyStrings(append(sent, retried...))).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != 0 {
		t.Errorf("%d events of the dropped week's receipts left", events)
	}
	// The tombstone stops a rerun of the dropped week, as after a DELETE.
	stone := startWeek(t, s, w31)
	if stone == nil || stone.ReceiptsPruned != 5 {
		t.Fatalf("tombstone of the dropped week: %+v, want 5 receipts pruned", stone)
	}
	// The live claim's week keeps its partition and its claim; the held
	// receipt is kept without --include-held.
	for _, k := range []digest.Key{live[0], held[0]} {
		if _, _, err := s.Show(ctx, k); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	for _, name := range []string{"receipts_2026_w32", "receipts_2026_w33"} {
		if !tableExists(t, s, name) {
			t.Errorf("%s dropped though it holds a live claim or a held receipt", name)
		}
	}
	// With the flag, the held receipt's week has nothing left: dropped.
	got = pruneOld(t, s, ledger.PruneRequest{IncludeHeld: true})
	want = []ledger.PrunedWeek{{Week: "2026-W33", Receipts: 1, Dropped: true}}
	if fmt.Sprint(got.Weeks) != fmt.Sprint(want) || tableExists(t, s, "receipts_2026_w33") {
		t.Errorf("prune --include-held: %+v, want %v and no receipts_2026_w33", got, want)
	}
	if stone := startWeek(t, s, w33); stone == nil || stone.ReceiptsPruned != 3 {
		t.Errorf("tombstone of 2026-W33 over both prunes: %+v, want 3 receipts", stone)
	}
}

// A week run since the cutoff keeps its partition, however settled.
func TestPruneKeepsARecentlyRunWeeksPartition(t *testing.T) {
	t.Parallel()
	s, clk := openPartitioned(t)
	startWeek(t, s, w31)
	claimSend(t, s, w31, "s", 2, digest.StateSent)
	clk.Advance(60 * 24 * time.Hour)
	startWeek(t, s, w31) // a rerun (a backfill) starts now
	got := pruneOld(t, s, ledger.PruneRequest{})
	if len(got.Weeks) != 0 || !tableExists(t, s, "receipts_2026_w31") {
		t.Errorf("prune of a week run since the cutoff: %+v", got)
	}
}

// receiptRows is receipts' whole row set, each row as JSON, in key order.
func receiptRows(t *testing.T, conn interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, table string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), fmt.Sprintf(`SELECT to_jsonb(r)::text FROM %s r ORDER BY key`, table))
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The migration from one table: every row kept as it was, one partition a
// week, and back down again.
func TestMigrationPartitionsExistingReceipts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &partClock{base: time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)} // 2026-W10
	s, _ := OpenTest(t, pgtest.Schema(t), Config{Now: clk.Now, LedgerNow: clk.Now})
	p := migrator(t, s)
	if _, err := p.UpTo(ctx, 5); err != nil {
		t.Fatal(err)
	}
	// Receipts of three weeks in every state, with events, written by the
	// store as it ran on 00005 (its statements without the week were
	// the same as the partitioned ones with it).
	_, err := s.pool.Exec(ctx, `
INSERT INTO receipts (key, key_id, state, previous_state, fingerprint, conflict_fingerprint, attempts, claim_token,
    lease_expires_at, send_started, send_started_at, maybe_sent, next_attempt_at, first_claimed_at, last_attempt_at,
    sent_at, provider_ref, last_error, run_id, iso_week, updated_at, first_run_id)
SELECT 'k1:' || encode(sha256(convert_to(w || st || i, 'UTF8')), 'hex'), 'k1', st, CASE WHEN i % 2 = 0 THEN 'claimed' END, 'fp' || i,
    CASE WHEN st = 'quarantined' THEN 'fp-other' END, 1 + i % 3, nextval('receipt_claim_token'),
    CASE WHEN st = 'claimed' THEN now() + interval '1 minute' END, i % 2 = 0, CASE WHEN i % 2 = 0 THEN now() END,
    st = 'retryable', CASE WHEN st = 'retryable' THEN now() + interval '1 hour' END, now() - interval '1 day', now(),
    CASE WHEN st = 'sent' THEN now() END, CASE WHEN st = 'sent' THEN 'ref-' || i END, CASE WHEN st <> 'sent' THEN 'why' END,
    'run-' || i, w, now(), CASE WHEN i % 3 = 0 THEN 'first-run' END
FROM unnest(ARRAY['2026-W30', '2026-W31', '2026-W32']) AS w,
     unnest(ARRAY['claimed', 'sent', 'retryable', 'failed', 'held', 'quarantined']) AS st,
     generate_series(1, 4) AS i;
INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
SELECT key, updated_at, previous_state, state, run_id, 'migrated' FROM receipts;`)
	if err != nil {
		t.Fatal(err)
	}
	columns := func() string {
		var c string
		err := s.pool.QueryRow(ctx, `SELECT string_agg(column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, ''), ', ' ORDER BY ordinal_position)
			FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'receipts'`).Scan(&c)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	beforeColumns := columns()
	beforeRows, beforeEvents := receiptRows(t, s.pool, "receipts"), receiptRows(t, s.pool, "receipt_events")
	if len(beforeRows) != 72 {
		t.Fatalf("%d receipts seeded, want 72", len(beforeRows))
	}
	if _, err := p.UpTo(ctx, 6); err != nil {
		t.Fatal(err)
	}
	if got := receiptRows(t, s.pool, "receipts"); fmt.Sprint(got) != fmt.Sprint(beforeRows) {
		t.Fatalf("receipts changed by the migration:\n%v\nwant\n%v", got, beforeRows)
	}
	if got := receiptRows(t, s.pool, "receipt_events"); fmt.Sprint(got) != fmt.Sprint(beforeEvents) {
		t.Fatal("receipt_events changed by the migration")
	}
	if got := columns(); got != beforeColumns {
		t.Errorf("receipts columns after the migration:\n%s\nwant\n%s", got, beforeColumns)
	}
	_, err = s.pool.Exec(ctx, `UPDATE receipts SET state = 'bogus' WHERE iso_week = '2026-W30'`)
	var pgErr interface{ SQLState() string }
	if !errors.As(err, &pgErr) || pgErr.SQLState() != sqlstateCheckViolation {
		t.Errorf("a state outside the CHECK after the migration: %v, want a check violation", err)
	}
	var perPartition []string
	rows, err := s.pool.Query(ctx, `SELECT tableoid::regclass::text || ' ' || iso_week || ' ' || count(*) FROM receipts GROUP BY tableoid, iso_week ORDER BY 1`)
	if err == nil {
		perPartition, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint([]string{"receipts_2026_w30 2026-W30 24", "receipts_2026_w31 2026-W31 24", "receipts_2026_w32 2026-W32 24"}); fmt.Sprint(perPartition) != want {
		t.Errorf("receipts by partition %v, want %v", perPartition, want)
	}
	for _, name := range []string{"receipts_2026_w30", "receipts_default"} {
		var opts []string
		if err := s.pool.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = $1::regclass`, name).Scan(&opts); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(opts) != "[fillfactor=70]" {
			t.Errorf("%s options %v, want fillfactor=70", name, opts)
		}
	}
	// This binary's store needs the migrations after 00006 too.
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	// Migration 00014: half of each page free for the happy path's updates.
	for _, name := range []string{"receipts_2026_w30", "receipts_default"} {
		var opts []string
		if err := s.pool.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = $1::regclass`, name).Scan(&opts); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(opts) != "[fillfactor=50]" {
			t.Errorf("%s options %v after every migration, want fillfactor=50", name, opts)
		}
	}
	// The store works on the migrated rows: a held receipt is shown and
	// released, a migrated claim finished with its week, a new claim of a
	// migrated week lands in its partition.
	ctx2 := context.Background()
	heldKey := digest.Key(fmt.Sprintf("k1:%x", sha256.Sum256([]byte("2026-W31held1"))))
	if _, _, err := s.Show(ctx2, heldKey); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx2, heldKey, ledger.Action{By: "test", Reason: "migrated"}); err != nil {
		t.Fatal(err)
	}
	claimKey := digest.Key(fmt.Sprintf("k1:%x", sha256.Sum256([]byte("2026-W32claimed1"))))
	var tok int64
	if err := s.pool.QueryRow(ctx2, `SELECT claim_token FROM receipts WHERE key = $1`, string(claimKey)).Scan(&tok); err != nil {
		t.Fatal(err)
	}
	errs, err := s.Finish(ctx2, []digest.Finish{{Key: claimKey, Token: tok, State: digest.StateSent, ProviderRef: "p", RunID: "r", Week: w32}})
	if err != nil || errs[0] != nil {
		t.Fatalf("finish a migrated claim: %v %v", err, errs)
	}
	keys := claimSend(t, s, digest.ISOWeek{Year: 2026, Week: 30}, "new", 2, digest.StateSent)
	if got := partitionOf(t, s, keys[0]); got != "receipts_2026_w30" {
		t.Errorf("new receipt of a migrated week in %s", got)
	}
	// Back to 00006 (the later migrations' down), then what 00006's down
	// must keep.
	if _, err := p.DownTo(ctx, 6); err != nil {
		t.Fatal(err)
	}
	after := receiptRows(t, s.pool, "receipts")

	// Down: one table again, the same rows, the indexes of 00005.
	if _, err := p.DownTo(ctx, 5); err != nil {
		t.Fatal(err)
	}
	var kind string
	if err := s.pool.QueryRow(ctx, `SELECT relkind::text FROM pg_class WHERE oid = 'receipts'::regclass`).Scan(&kind); err != nil {
		t.Fatal(err)
	}
	if kind != "r" {
		t.Errorf("receipts after down: relkind %q, want an ordinary table", kind)
	}
	if got := receiptRows(t, s.pool, "receipts"); fmt.Sprint(got) != fmt.Sprint(after) {
		t.Error("receipts changed by the down migration")
	}
	if got := columns(); got != beforeColumns {
		t.Errorf("receipts columns after down:\n%s\nwant\n%s", got, beforeColumns)
	}
	var leftover int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname LIKE 'receipts\_%' AND relkind IN ('r', 'p')
		AND relnamespace = current_schema()::regnamespace`).Scan(&leftover); err != nil {
		t.Fatal(err)
	}
	if leftover != 0 {
		t.Errorf("%d partitions left after down", leftover)
	}
	var indexes []string
	rows, err = s.pool.Query(ctx, `SELECT indexname::text FROM pg_indexes WHERE tablename = 'receipts' AND schemaname = current_schema() ORDER BY 1`)
	if err == nil {
		indexes, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		t.Fatal(err)
	}
	if want := "[receipts_attention receipts_pkey receipts_week_state]"; fmt.Sprint(indexes) != want {
		t.Errorf("indexes after down %v, want %s", indexes, want)
	}
	// And up again: the store's own migration (after 00006, each
	// receipt has more columns: address_key, null, attention, computed
	// from state, 00012, fingerprint_parts, null, 00019, and digest_type
	// and content_version, null, 00020).
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ALTER TABLE receipts DROP COLUMN address_key, DROP COLUMN attention, DROP COLUMN fingerprint_parts,
		DROP COLUMN digest_type, DROP COLUMN content_version`); err != nil {
		t.Fatal(err)
	}
	if got := receiptRows(t, s.pool, "receipts"); fmt.Sprint(got) != fmt.Sprint(after) {
		t.Error("receipts changed by up after down")
	}
}

// Prune, run by the owner of receipts every month or so, makes the coming
// weeks' partitions as migrate does, so that they stay made between
// deploys; runs under a role that cannot make them find them there.
func TestPruneMakesTheComingWeeksPartitions(t *testing.T) {
	t.Parallel()
	s, clk := openPartitioned(t)
	clk.Advance(12 * 7 * 24 * time.Hour) // 12 weeks on: past what migrate made
	coming := digest.WeekOf(s.now(), time.UTC).Next()
	last := coming
	for range partitionWeeksAhead - 1 {
		last = last.Next()
	}
	for _, w := range []digest.ISOWeek{coming, last} {
		if tableExists(t, s, weekPartition(w)) {
			t.Fatalf("%s exists before the prune", weekPartition(w))
		}
	}
	pruneOld(t, s, ledger.PruneRequest{})
	for _, w := range []digest.ISOWeek{coming, last} {
		if !tableExists(t, s, weekPartition(w)) {
			t.Errorf("prune did not make %s", weekPartition(w))
		}
	}
}

// The send mark of a week with a partition is aimed at the partition
// (startFor): it marks what it did through receipts, leaves the week's
// counts alone (receipts' statement triggers do not fire, and a mark
// changes no state), and a week without a partition is marked through
// receipts. A partition dropped after the store found it (a prune) sends
// the mark through receipts again: never an error, never a claim reported
// lost that is not.
func TestStartAimsAtTheWeeksPartition(t *testing.T) {
	t.Parallel()
	s, _ := openPartitioned(t)
	startWeek(t, s, w32) // w33 gets no partition: its receipts go to the DEFAULT
	ctx := context.Background()
	claimed := func(week digest.ISOWeek, prefix string, n int) []digest.Fence {
		t.Helper()
		fences := make([]digest.Fence, n)
		for i, r := range claimN(t, s, week, prefix, n) {
			if r.Outcome != digest.OutcomeClaimed {
				t.Fatalf("claim %d: %v", i, r.Outcome)
			}
			fences[i] = digest.Fence{Key: r.Key, Token: r.Token, Week: week}
		}
		return fences
	}
	mark := func(fences []digest.Fence) {
		t.Helper()
		errs, err := s.StartSending(ctx, fences)
		if err != nil || errors.Join(errs...) != nil {
			t.Fatalf("start sending: %v %v", err, errs)
		}
		for _, f := range fences {
			r, _, err := s.Show(ctx, f.Key)
			if err != nil || !r.SendStarted || r.State != digest.StateClaimed {
				t.Fatalf("%s after the mark: %+v %v; want claimed, send started", f.Key, r, err)
			}
		}
	}
	stmt := func(week digest.ISOWeek) weekStarts {
		v, ok := s.leaves.Load(week.String())
		if !ok {
			t.Fatalf("no start statement kept for %s", week)
		}
		return v.(weekStarts)
	}
	onReceipts := weekStarts{fresh: startFreshSQL, full: startSQL}
	count := func(week digest.ISOWeek) int64 {
		var n int64
		if err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(n), 0)::bigint FROM week_state_counts WHERE iso_week = $1 AND state = 'claimed'`,
			week.String()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	in32 := claimed(w32, "a", 3)
	mark(in32)
	got := stmt(w32)
	for _, sql := range []string{got.fresh, got.full} {
		if !strings.Contains(sql, `UPDATE "receipts_2026_w32" r`) || strings.Contains(sql, "receipts r") || strings.Contains(sql, "receipts o") {
			t.Fatalf("2026-W32's start statement is not aimed at its partition:\n%s", sql)
		}
	}
	if !strings.Contains(got.full, `JOIN "receipts_2026_w32" o`) {
		t.Fatalf("2026-W32's full start statement reads the earlier start elsewhere:\n%s", got.full)
	}
	if n := count(w32); n != 3 {
		t.Fatalf("2026-W32 counts %d claimed after the mark; want 3", n)
	}
	in33 := claimed(w33, "a", 2)
	mark(in33)
	if got := stmt(w33); got != onReceipts {
		t.Fatalf("2026-W33 has no partition, yet its start statements are\n%+v", got)
	}

	fins := make([]digest.Finish, len(in32))
	for i, f := range in32 {
		fins[i] = digest.Finish{Key: f.Key, Token: f.Token, State: digest.StateSent, ProviderRef: "ref", RunID: "run", Week: w32}
	}
	if errs, err := s.Finish(ctx, fins); err != nil || errors.Join(errs...) != nil {
		t.Fatalf("finish: %v %v", err, errs)
	}
	if _, err := s.pool.Exec(ctx, `DROP TABLE receipts_2026_w32`); err != nil {
		t.Fatal(err)
	}
	mark(claimed(w32, "b", 2)) // in the DEFAULT partition now
	if got := stmt(w32); got != onReceipts {
		t.Fatalf("2026-W32's partition is gone, yet its start statements are\n%+v", got)
	}
}

// Migration 00015 gives the partitions that exist the SELECT and UPDATE
// grants receipts has (to each role but its owner), as partition.go gives
// those it creates: a role granted receipts may then mark sends in the
// week's partition directly. Nothing else is granted.
func TestMigrationGrantsPartitionsLikeReceipts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := OpenTest(t, pgtest.Schema(t), Config{})
	p := migrator(t, s)
	if _, err := p.UpTo(ctx, 14); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `CREATE TABLE receipts_2026_w32 PARTITION OF receipts FOR VALUES IN ('2026-W32')`); err != nil {
		t.Fatal(err)
	}
	role := fmt.Sprintf("digest_job_%d", time.Now().UnixNano())
	ident := pgx.Identifier{role}.Sanitize()
	if _, err := s.pool.Exec(ctx, "CREATE ROLE "+ident); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.pool.Exec(context.Background(), "DROP OWNED BY "+ident)
		s.pool.Exec(context.Background(), "DROP ROLE "+ident)
	})
	if _, err := s.pool.Exec(ctx, "GRANT SELECT, INSERT, UPDATE, DELETE ON receipts TO "+ident); err != nil {
		t.Fatal(err)
	}
	privileges := func(rel string) string {
		t.Helper()
		var got []string
		for _, priv := range []string{"SELECT", "INSERT", "UPDATE", "DELETE"} {
			var ok bool
			if err := s.pool.QueryRow(ctx, `SELECT has_table_privilege($1, $2::regclass, $3)`, role, rel, priv).Scan(&ok); err != nil {
				t.Fatal(err)
			}
			if ok {
				got = append(got, priv)
			}
		}
		return fmt.Sprint(got)
	}
	if got := privileges("receipts_2026_w32"); got != "[]" {
		t.Fatalf("before 00015 the role has %s on the partition; want none", got)
	}
	if _, err := p.UpTo(ctx, 15); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"receipts_2026_w32", defaultPartition} {
		if got := privileges(rel); got != "[SELECT UPDATE]" {
			t.Errorf("after 00015 the role has %s on %s; want [SELECT UPDATE]", got, rel)
		}
	}
}
