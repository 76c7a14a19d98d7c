package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/ledger/postgres"
)

// tableCounters are a table's cumulative counters and sizes.
type tableCounters struct {
	ins, upd, hot        int64
	heap, index, history int64 // bytes: receipts heap, its indexes, receipt_events with its indexes
	historyRows          int64
}

func readCounters(ctx context.Context, t *testing.T, pool *pgxpool.Pool) tableCounters {
	t.Helper()
	// Statistics reach the shared counters at a transaction's end once a
	// flush is asked for; the next statement (a new transaction) reads them.
	if _, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	// receipts is partitioned (migration 00006): its counters and sizes
	// are its partitions'.
	var c tableCounters
	err := pool.QueryRow(ctx, `SELECT sum(n_tup_ins)::bigint, sum(n_tup_upd)::bigint, sum(n_tup_hot_upd)::bigint,
		sum(pg_relation_size(relid))::bigint, sum(pg_indexes_size(relid))::bigint, pg_total_relation_size('receipt_events'),
		(SELECT count(*) FROM receipt_events)
		FROM pg_stat_user_tables WHERE relid IN (SELECT relid FROM pg_partition_tree('receipts') WHERE isleaf)`).
		Scan(&c.ins, &c.upd, &c.hot, &c.heap, &c.index, &c.history, &c.historyRows)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// backendCPU is the CPU time the backend pid has used, from /proc (the
// server runs on this machine in tests).
func backendCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Logf("backend CPU not readable: %v", err)
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from 3 (state) on
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// TestCostPerDigest runs the happy path of a run, claim → start sending →
// finish sent, over keys in batches of 100 on one connection and reports
// per digest what PostgreSQL wrote and spent: rows inserted and updated
// (HOT or not), heap, index and history bytes, WAL bytes (the server's
// WAL position moved, so other work on the server at the same time counts
// too) and the backend's CPU. It asserts only the deterministic counts.
// DIGEST_LEDGER_COST_KEYS sets the number of keys (default 1,000; the
// numbers in docs/benchmarks.md are from 10,000), DIGEST_LEDGER_COST_BATCH
// the batch size (default 100; 1 measures the single-key statements),
// DIGEST_LEDGER_COST_MARK_CHUNK the keys per send mark (default the batch).
func TestCostPerDigest(t *testing.T) {
	t.Parallel()
	n := 1000
	if v := os.Getenv("DIGEST_LEDGER_COST_KEYS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 || n%100 != 0 {
			t.Fatalf("DIGEST_LEDGER_COST_KEYS=%q: want a positive multiple of 100", v)
		}
	}
	ctx := context.Background()
	u, err := url.Parse(pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "1")
	u.RawQuery = q.Encode()
	s, pool := postgres.OpenTest(t, u.String(), postgres.Config{})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	week := digest.ISOWeek{Year: 2026, Week: 32}
	// As runs do: each start creates its week's partition. The 13 weeks
	// before are there as under the default replay horizon (90 days), so
	// that planning and locking see the partitions a ledger keeps.
	// DIGEST_LEDGER_COST_WEEKS sets the number of partitions (0: the
	// digests go to the DEFAULT partition).
	weeks := 14
	if v := os.Getenv("DIGEST_LEDGER_COST_WEEKS"); v != "" {
		if weeks, err = strconv.Atoi(v); err != nil || weeks < 0 {
			t.Fatalf("DIGEST_LEDGER_COST_WEEKS=%q: want a number of partitions", v)
		}
	}
	w := week
	for range weeks {
		if _, err := s.StartWeek(ctx, digest.SnapshotPin{Type: "cost", Week: w, Version: "v1"}, time.Now()); err != nil {
			t.Fatal(err)
		}
		w = w.Prev()
	}
	parts := []string{"receipts_default"}
	if weeks > 0 {
		parts = append(parts, "receipts_2026_w32")
	}
	for _, part := range parts {
		var opts []string
		if err := pool.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = $1::regclass`, part).Scan(&opts); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(opts, "fillfactor=50") {
			t.Errorf("%s options %v: want fillfactor=50 (migration 00014, partition.go), room for HOT updates", part, opts)
		}
	}
	var pid int
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	before := readCounters(ctx, t, pool)
	var lsn0, lsn1 string
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn0); err != nil {
		t.Fatal(err)
	}
	cpu0 := backendCPU(t, pid)
	batch := 100
	if v := os.Getenv("DIGEST_LEDGER_COST_BATCH"); v != "" {
		if b, err := strconv.Atoi(v); err == nil && b > 0 && n%b == 0 {
			batch = b
		} else {
			t.Fatalf("DIGEST_LEDGER_COST_BATCH=%q: want a divisor of %d", v, n)
		}
	}
	// A run marks its claims a chunk at a time (run.startChunk: 25 with
	// the defaults); DIGEST_LEDGER_COST_MARK_CHUNK measures that shape.
	chunk := batch
	if v := os.Getenv("DIGEST_LEDGER_COST_MARK_CHUNK"); v != "" {
		if c, err := strconv.Atoi(v); err == nil && c > 0 && batch%c == 0 {
			chunk = c
		} else {
			t.Fatalf("DIGEST_LEDGER_COST_MARK_CHUNK=%q: want a divisor of the batch size %d", v, batch)
		}
	}
	reqs := make([]digest.ClaimRequest, batch)
	fences := make([]digest.Fence, batch)
	fins := make([]digest.Finish, batch)
	for b := range n / batch {
		for j := range reqs {
			reqs[j] = digest.ClaimRequest{Keys: []digest.Key{digest.Key(fmt.Sprintf("k1:%064x", b*batch+j))},
				Fingerprint: "fp", Week: week, RunID: "cost", Lease: time.Minute}
		}
		res, err := s.Claim(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		for j, r := range res {
			if r.Outcome != digest.OutcomeClaimed {
				t.Fatalf("claim %d: %v", j, r.Outcome)
			}
			fences[j] = digest.Fence{Key: r.Key, Token: r.Token, Week: week}
			fins[j] = digest.Finish{Key: r.Key, Token: r.Token, State: digest.StateSent, ProviderRef: "ref-" + strconv.Itoa(j), RunID: "cost", Week: week}
		}
		for c := 0; c < batch; c += chunk {
			for _, e := range must(s.StartSending(ctx, fences[c:c+chunk])) {
				if e != nil {
					t.Fatal(e)
				}
			}
		}
		for _, errs := range [][]error{must(s.Finish(ctx, fins))} {
			for _, e := range errs {
				if e != nil {
					t.Fatal(e)
				}
			}
		}
	}
	cpu1 := backendCPU(t, pid)
	var wal int64
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text, pg_current_wal_lsn() - $1::pg_lsn`, lsn0).Scan(&lsn1, &wal); err != nil {
		t.Fatal(err)
	}
	after := readCounters(ctx, t, pool)
	per := func(v int64) float64 { return float64(v) / float64(n) }
	t.Logf("%d digests, per digest: receipts inserted %.2f, updated %.2f (HOT %.2f), history rows %.2f; "+
		"heap %.0f B, indexes %.0f B, history %.0f B, WAL %.0f B (server-wide); backend CPU %.1f µs",
		n, per(after.ins-before.ins), per(after.upd-before.upd), per(after.hot-before.hot), per(after.historyRows-before.historyRows),
		per(after.heap-before.heap), per(after.index-before.index), per(after.history-before.history), per(wal),
		float64((cpu1-cpu0).Microseconds())/float64(n))
	if got := after.ins - before.ins; got != int64(n) {
		t.Errorf("receipts inserted: %d, want %d (one per digest)", got, n)
	}
	if got := after.historyRows - before.historyRows; got != 0 {
		t.Errorf("history rows: %d, want 0: the receipt tells the happy path", got)
	}
	if got := after.upd - before.upd; got != 2*int64(n) {
		t.Errorf("receipts updated: %d, want %d (start and finish)", got, 2*n)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
