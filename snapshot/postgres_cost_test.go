package snapshot_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/snapshot"
)

// statsPool returns a pool of one connection (one backend, whose CPU time
// /proc tells) on a fresh schema holding n synthetic customers of pgWeek.
// With analyze false the tables are created with autovacuum off and loaded
// without ANALYZE: the planner sees no column statistics at all, as after
// an operator's bulk load that autovacuum has not visited yet.
func statsPool(tb testing.TB, n int, analyze bool) *pgxpool.Pool {
	tb.Helper()
	ctx := context.Background()
	u, err := url.Parse(pgtest.Schema(tb))
	if err != nil {
		tb.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "1")
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	records := snapshot.Synthetic(n, pgWeek, 7)
	if analyze {
		if _, _, err := snapshot.Seed(ctx, pool, records); err != nil {
			tb.Fatal(err)
		}
		return pool
	}
	if _, err := pool.Exec(ctx, snapshot.SchemaSQL+`;
ALTER TABLE digest_customers SET (autovacuum_enabled = false);
ALTER TABLE digest_activity SET (autovacuum_enabled = false);`); err != nil {
		tb.Fatal(err)
	}
	if _, _, err := snapshot.LoadWithoutAnalyze(ctx, pool, records); err != nil {
		tb.Fatal(err)
	}
	var analyzed bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stats WHERE schemaname = current_schema()
AND tablename IN ('digest_customers', 'digest_activity'))`).Scan(&analyzed); err != nil {
		tb.Fatal(err)
	}
	if analyzed {
		tb.Fatal("the tables loaded without ANALYZE have statistics")
	}
	return pool
}

// readCost is what PostgreSQL spent on one read of a week: its backend's
// CPU time, the tuples it fetched from both tables and the buffers it hit
// or read (pg_stat_user_tables and pg_statio_user_tables).
type readCost struct {
	cpu                      time.Duration
	tuples, hit, read, scans int64
	customers, activity      int
}

// tableCounters sums the two tables' access counters. Statistics reach the
// shared counters at a transaction's end once a flush is asked for; the
// next statement (a new transaction) reads them.
func tableCounters(ctx context.Context, tb testing.TB, pool *pgxpool.Pool) (tuples, hit, read, scans int64) {
	tb.Helper()
	if _, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		tb.Fatal(err)
	}
	err := pool.QueryRow(ctx, `
SELECT sum(coalesce(s.seq_tup_read, 0) + coalesce(s.idx_tup_fetch, 0))::bigint,
       sum(coalesce(io.heap_blks_hit, 0) + coalesce(io.idx_blks_hit, 0))::bigint,
       sum(coalesce(io.heap_blks_read, 0) + coalesce(io.idx_blks_read, 0))::bigint,
       sum(coalesce(s.seq_scan, 0) + coalesce(s.idx_scan, 0))::bigint
FROM pg_stat_user_tables s JOIN pg_statio_user_tables io USING (relid)
WHERE s.schemaname = current_schema() AND s.relname IN ('digest_customers', 'digest_activity')`).
		Scan(&tuples, &hit, &read, &scans)
	if err != nil {
		tb.Fatal(err)
	}
	return tuples, hit, read, scans
}

// backendCPU is the CPU time the backend pid has used so far, from
// /proc/PID/stat (the server runs on this machine in tests).
func backendCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatalf("backend CPU not readable (is PostgreSQL on this machine?): %v", err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from 3 (state) on
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

func backendPID(ctx context.Context, tb testing.TB, pool *pgxpool.Pool) int {
	tb.Helper()
	var pid int
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		tb.Fatal(err)
	}
	return pid
}

// measureRead reads the week once through src on pool's one connection,
// from no prepared statement, as each digest run starts: the first five
// executions of the page statement get custom plans, made for their
// arguments, and only then may PostgreSQL settle on a generic plan.
func measureRead(ctx context.Context, tb testing.TB, pool *pgxpool.Pool, src digest.Source, q digest.SourceQuery) readCost {
	tb.Helper()
	pid := backendPID(ctx, tb, pool)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	err = conn.Conn().DeallocateAll(ctx)
	conn.Release()
	if err != nil {
		tb.Fatal(err)
	}
	t0, h0, r0, s0 := tableCounters(ctx, tb, pool)
	cpu0 := backendCPU(tb, pid)
	var c readCost
	for r, err := range src.Records(ctx, q) {
		if err != nil {
			tb.Fatal(err)
		}
		c.customers++
		c.activity += len(r.Activity)
	}
	c.cpu = backendCPU(tb, pid) - cpu0
	t1, h1, r1, s1 := tableCounters(ctx, tb, pool)
	c.tuples, c.hit, c.read, c.scans = t1-t0, h1-h0, r1-r0, s1-s0
	if pid2 := backendPID(ctx, tb, pool); pid2 != pid {
		tb.Fatalf("the pool changed backends (%d then %d): the CPU time is not the read's", pid, pid2)
	}
	return c
}

// sourceCases are the reads measured: the whole week with fresh
// statistics and with none, and one shard of four either way.
var sourceCases = []struct {
	name    string
	analyze bool
	shard   digest.Shard
}{
	{"stats", true, digest.Shard{}},
	{"nostats", false, digest.Shard{}},
	{"stats-shard0of4", true, digest.Shard{Index: 0, Count: 4}},
	{"nostats-shard0of4", false, digest.Shard{Index: 0, Count: 4}},
}

// planModes are PostgreSQL's plan_cache_mode settings a read is measured
// under. auto is what one connection does: custom plans, made for each
// page's arguments, for the first five executions of the prepared page
// statement, then a generic plan if its estimated cost is no worse. A run
// spreads its pages over the pool's connections, each with its own
// prepared statement, so with four connections the first twenty pages may
// all be custom plans: custom measures that. generic is every page on the
// generic plan.
var planModes = []string{"auto", "custom", "generic"}

// BenchmarkPostgresSourceRead reads a whole seeded week through
// Postgres.Records on one connection and reports per customer read what
// the PostgreSQL backend spent: CPU (pg-µs/customer, from /proc), tuples
// fetched from the two tables, and buffers hit and read. Each read starts
// with no prepared statement, as a digest run does. The customers are
// DIGEST_SOURCE_BENCH_CUSTOMERS (default 20,000, as digest seed). With -v
// it logs EXPLAIN (ANALYZE, BUFFERS) of the first page, custom and generic
// plan. The CPU figure is coarse (/proc counts in 10 ms ticks): use
// -benchtime 5x or more.
//
//	go test ./snapshot -run '^$' -bench PostgresSourceRead -benchtime 5x -v
func BenchmarkPostgresSourceRead(b *testing.B) {
	n := 20000
	if v := os.Getenv("DIGEST_SOURCE_BENCH_CUSTOMERS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("DIGEST_SOURCE_BENCH_CUSTOMERS=%q: want a positive number", v)
		}
	}
	for _, c := range sourceCases {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			pool := statsPool(b, n, c.analyze)
			src := snapshot.NewPostgres(pool, 0)
			q := digest.SourceQuery{Week: pgWeek, Location: time.UTC, AsOf: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Shard: c.shard}
			if testing.Verbose() {
				b.Logf("%s, first page, custom plan:\n%s", c.name, explainPage(ctx, b, pool, 0, q, "custom"))
				b.Logf("%s, first page, generic plan:\n%s", c.name, explainPage(ctx, b, pool, 0, q, "generic"))
			}
			measureRead(ctx, b, pool, src, q) // bring the tables into shared buffers
			for _, mode := range planModes {
				b.Run(mode, func(b *testing.B) {
					setPlanMode(ctx, b, pool, mode)
					defer setPlanMode(ctx, b, pool, "auto")
					var sum readCost
					for b.Loop() {
						c := measureRead(ctx, b, pool, src, q)
						sum.cpu += c.cpu
						sum.tuples += c.tuples
						sum.hit += c.hit
						sum.read += c.read
						sum.scans += c.scans
						sum.customers += c.customers
					}
					per := float64(sum.customers)
					b.ReportMetric(float64(sum.cpu.Microseconds())/per, "pg-µs/customer")
					b.ReportMetric(float64(sum.tuples)/per, "tuples/customer")
					b.ReportMetric(float64(sum.hit+sum.read)/per, "buffers/customer")
					b.ReportMetric(float64(sum.read)/per, "reads/customer")
					b.ReportMetric(float64(sum.customers)/float64(b.N), "customers/op")
				})
			}
		})
	}
}

// setPlanMode sets plan_cache_mode on the pool's one connection: auto,
// custom or generic.
func setPlanMode(ctx context.Context, tb testing.TB, pool *pgxpool.Pool, mode string) {
	tb.Helper()
	setting := map[string]string{"auto": "auto", "custom": "force_custom_plan", "generic": "force_generic_plan"}[mode]
	if _, err := pool.Exec(ctx, "SET plan_cache_mode = "+setting); err != nil {
		tb.Fatal(err)
	}
}

// explainPage returns EXPLAIN (ANALYZE, BUFFERS) of the first page of q,
// pageSize customers (0 for the default),
// as a prepared statement executed with plan_cache_mode forced to mode
// (custom or generic).
func explainPage(ctx context.Context, tb testing.TB, pool *pgxpool.Pool, pageSize int, q digest.SourceQuery, mode string) string {
	tb.Helper()
	query, args, err := snapshot.NewPostgres(pool, pageSize).FirstPage(ctx, q)
	if err != nil {
		tb.Fatal(err)
	}
	setPlanMode(ctx, tb, pool, mode)
	defer setPlanMode(ctx, tb, pool, "auto")
	conn, err := pool.Acquire(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Conn().Prepare(ctx, "explained_page", query); err != nil {
		tb.Fatal(err)
	}
	defer func() {
		if err := conn.Conn().Deallocate(ctx, "explained_page"); err != nil {
			tb.Fatal(err)
		}
	}()
	marks := make([]string, len(args))
	for i := range marks {
		marks[i] = "$" + strconv.Itoa(i+1)
	}
	// EXECUTE's arguments are not parameters of EXPLAIN: pgx writes them
	// into the statement as literals.
	rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) EXECUTE explained_page("+strings.Join(marks, ", ")+")",
		append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
	if err != nil {
		tb.Fatal(err)
	}
	var out strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			tb.Fatal(err)
		}
		out.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out.String()
}
