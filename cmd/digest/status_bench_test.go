package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/postgres"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/snapshot"
	"github.com/weeklydigest/digest/weekstatus"
)

// BenchmarkStatus times "digest status" on a PostgreSQL week of N
// customers (DIGEST_STATUS_BENCH_N, default 2,000) whose digests were all
// sent, as eight shard runs leave it: counted from the ledger (the runs'
// recorded reads against the receipts by state) and with --customers
// (every customer read from the source and matched to its receipt), for
// the whole week and for one shard of 8; each timed once, in-process (no
// process start), with the receipts' pages as a run leaves them and again
// after VACUUM, and how far the live heap rose during each (heap-MiB);
// then --customers of an early pin of the week (early-customers), which
// reads the source as of two cutoffs.
// docs/benchmarks.md has the
// command and the figures:
//
//	DIGEST_STATUS_BENCH_N=1000000 go test -run '^$' -bench BenchmarkStatus -benchtime 1x -timeout 2h ./cmd/digest/
//
// The week is built without a run, at the speed of COPY: the source by
// snapshot.Seed, a sent receipt per Send customer by COPY, and each
// shard's expectation as its run records it (weekstatus.Reader over the
// same read).
func BenchmarkStatus(b *testing.B) {
	n := 2000
	if v := os.Getenv("DIGEST_STATUS_BENCH_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("DIGEST_STATUS_BENCH_N=%q: want a positive number", v)
		}
	}
	ctx := context.Background()
	url := pgtest.Schema(b)
	vars := map[string]string{"DIGEST_DATABASE_URL": url, "DIGEST_HMAC_KEYS": testKeys, "DIGEST_LOG_LEVEL": "error"}
	var peak uint64 // the live heap's peak during the last digestCmd, in bytes
	want := ExitOK  // the exit code digestCmd expects
	digestCmd := func(args ...string) (time.Duration, map[string]any) {
		var out, errb bytes.Buffer
		env := &Env{Getenv: func(k string) string { return vars[k] }, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}
		runtime.GC()
		stop := sampleHeapPeak(&peak)
		start := time.Now()
		code := Main(ctx, args, env)
		d := time.Since(start)
		stop()
		if code != want {
			b.Fatalf("digest %v: exit %d, want %d\n%s%s", args, code, want, out.String(), errb.String())
		}
		var st map[string]any
		if strings.Contains(strings.Join(args, " "), "--json") {
			if err := json.Unmarshal(out.Bytes(), &st); err != nil {
				b.Fatal(err)
			}
		}
		return d, st
	}
	digestCmd("migrate")
	pool, err := postgres.NewPool(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	store := postgres.New(pool, postgres.Config{})

	week := digest.ISOWeek{Year: 2026, Week: 48}
	spec := digest.Spec{Week: week, Location: time.UTC, Type: "weekly_activity", Version: "v1"}
	start := time.Now()
	customers, rows, err := snapshot.Seed(ctx, pool, snapshot.Synthetic(n, week, 1))
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("source: %d customers, %d activity rows seeded in %v", customers, rows, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	keys, err := digest.ParseKeyring(testKeys)
	if err != nil {
		b.Fatal(err)
	}
	pin := digest.SnapshotPin{Type: spec.Type, Week: week, Version: spec.Version}
	wp, err := store.PinSnapshot(ctx, pin, digest.WeekPin{AsOf: run.Cutoff(week, time.UTC, 4*time.Hour), Zone: "UTC", KeyID: keys.CurrentID()})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS receipts_2026_w48 PARTITION OF receipts FOR VALUES IN ('2026-W48') WITH (fillfactor = 50)`); err != nil {
		b.Fatal(err)
	}
	// One read of the source, as the eight shard runs read it: each
	// shard's reading, and a sent receipt for each Send digest.
	const shards = 8
	src := snapshot.NewPostgres(pool, 0)
	var readings [shards]struct{ send, suppressed, empty, notBuilt int64 }
	now := time.Now().UTC()
	var receipts [][]any
	for rec, err := range src.Records(ctx, digest.SourceQuery{Week: week, Location: time.UTC, AsOf: wp.AsOf}) {
		if err != nil {
			b.Fatal(err)
		}
		r := &readings[digest.ShardOf(rec.Customer.ID, shards)]
		d, v, _ := run.VerdictOf(rec, spec, digest.Shard{}, false)
		switch v {
		case run.VerdictSend:
			r.send++
			receipts = append(receipts, []any{string(keys.Key(d.Identity)), keys.CurrentID(), "sent", d.Fingerprint(), 1, int64(len(receipts) + 1),
				now, now, now, "bench", "bench", week.String(), now})
		case run.VerdictSuppressed:
			r.suppressed++
		case run.VerdictEmpty:
			r.empty++
		default:
			r.notBuilt++
		}
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"receipts"}, []string{"key", "key_id", "state", "fingerprint", "attempts", "claim_token",
		"first_claimed_at", "last_attempt_at", "sent_at", "provider_ref", "run_id", "iso_week", "updated_at"}, pgx.CopyFromRows(receipts)); err != nil {
		b.Fatal(err)
	}
	sent := len(receipts)
	receipts = nil // not held while status is measured
	for i, r := range readings {
		e := ledger.Expectation{Shard: digest.Shard{Index: i, Count: shards}.String(), AsOf: wp.AsOf, Zone: "UTC", KeyID: wp.KeyID,
			Send: r.send, Suppressed: r.suppressed, Empty: r.empty, NotBuilt: r.notBuilt, RunID: fmt.Sprintf("bench-%d", i), RecordedAt: time.Now()}
		if err := store.RecordExpectation(ctx, pin, e); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `ANALYZE receipts_2026_w48`); err != nil {
		b.Fatal(err)
	}
	b.Logf("ledger: %d sent receipts and %d shard expectations written in %v", sent, shards, time.Since(start).Round(time.Millisecond))
	// What each shard's run asks of the week besides its digests: its pin
	// (the week's receipts by key id) at the start, its expectation (the
	// receipts under other key ids) at the end.
	start = time.Now()
	if _, err := store.PinSnapshot(ctx, pin, digest.WeekPin{AsOf: wp.AsOf, Zone: "UTC", KeyID: wp.KeyID}); err != nil {
		b.Fatal(err)
	}
	pinTime := time.Since(start)
	start = time.Now()
	e := ledger.Expectation{Shard: digest.Shard{Index: 0, Count: shards}.String(), AsOf: wp.AsOf, Zone: "UTC", KeyID: wp.KeyID,
		Send: readings[0].send, Suppressed: readings[0].suppressed, Empty: readings[0].empty, NotBuilt: readings[0].notBuilt, RunID: "bench-0", RecordedAt: time.Now()}
	if err := store.RecordExpectation(ctx, pin, e); err != nil {
		b.Fatal(err)
	}
	recordTime := time.Since(start)
	b.Logf("a run's pin %v, its expectation %v", pinTime.Round(time.Millisecond), recordTime.Round(time.Millisecond))

	type mode struct {
		name string
		args []string
		from string
	}
	modes := []mode{
		{"week", nil, weekstatus.CountedFromLedger},
		{"shard", []string{"--shard", "3/8"}, weekstatus.CountedFromLedger},
	}
	if os.Getenv("DIGEST_STATUS_BENCH_FULL") != "0" {
		modes = append(modes, mode{"week-customers", []string{"--customers"}, weekstatus.CountedFromSource},
			mode{"shard-customers", []string{"--shard", "3/8", "--customers"}, weekstatus.CountedFromSource})
	}
	b.ResetTimer()
	b.ReportMetric(pinTime.Seconds(), "s/pin")
	b.ReportMetric(recordTime.Seconds(), "s/expectation")
	for range b.N {
		for _, vacuumed := range []bool{false, true} {
			if vacuumed {
				b.StopTimer()
				if _, err := pool.Exec(ctx, `VACUUM (ANALYZE) receipts_2026_w48`); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			fmt.Fprintf(os.Stderr, "counts plan (vacuumed %v):\n%s", vacuumed, explain(b, pool, countsSQL))
			for _, m := range modes {
				if vacuumed && m.from == weekstatus.CountedFromSource {
					continue // the source read dominates: once is enough
				}
				d, st := digestCmd(append([]string{"status", "--week", "2026-W48", "--json"}, m.args...)...)
				if st["counted_from"] != m.from || st["verdict"] != "complete" {
					b.Fatalf("%s: counted from %v (%v), verdict %v", m.name, st["counted_from"], st["source_reason"], st["verdict"])
				}
				name := m.name
				if vacuumed {
					name += "-vacuumed"
				}
				b.ReportMetric(d.Seconds(), "s/"+name)
				b.ReportMetric(float64(peak)/(1<<20), "heap-MiB/"+name)
				b.Logf("status %s (%d receipts): %v, peak live heap %.1f MiB", name, sent, d.Round(time.Millisecond), float64(peak)/(1<<20))
			}
		}
		if os.Getenv("DIGEST_STATUS_BENCH_FULL") == "0" {
			continue
		}
		// An early pin, as --early-cutoff makes one: another version of the
		// week pinned at Wednesday noon, nothing sent. Status reads the
		// source as of the pin and as of the week's cutoff, side by side,
		// to count what the pin left out.
		early := digest.SnapshotPin{Type: spec.Type, Week: week, Version: "early"}
		if _, err := store.PinSnapshot(ctx, early, digest.WeekPin{AsOf: week.Start(time.UTC).Add(60 * time.Hour), Zone: "UTC", KeyID: wp.KeyID, Partial: true}); err != nil {
			b.Fatal(err)
		}
		vars["DIGEST_VERSION"], want = early.Version, ExitIncomplete
		d, st := digestCmd("status", "--week", "2026-W48", "--json", "--customers")
		delete(vars, "DIGEST_VERSION")
		want = ExitOK
		if n, _ := st["excluded_customers"].(float64); st["verdict"] != weekstatus.VerdictPartial || n < 1 {
			b.Fatalf("early pin: verdict %v, %v customers excluded; want %s and some", st["verdict"], st["excluded_customers"], weekstatus.VerdictPartial)
		}
		b.ReportMetric(d.Seconds(), "s/early-customers")
		b.ReportMetric(float64(peak)/(1<<20), "heap-MiB/early-customers")
		b.Logf("status --customers of an early pin (%v customers excluded): %v, peak live heap %.1f MiB", st["excluded_customers"], d.Round(time.Millisecond), float64(peak)/(1<<20))
	}
}

// sampleHeapPeak keeps in *peak how far the live heap (the bytes of heap
// objects, runtime/metrics) rose above where it stood when called, read
// every 10 ms until the returned stop is called: what "digest status"
// holds at once, not what it allocates, nor what the benchmark itself
// holds (the week's receipts it wrote).
func sampleHeapPeak(peak *uint64) (stop func()) {
	*peak = 0
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	read := func() {
		metrics.Read(sample)
		if v := sample[0].Value.Uint64(); v > base {
			*peak = max(*peak, v-base)
		}
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			read()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		read()
	}
}

// countsSQL is the week's count by state status reads (ledger Counts).
const countsSQL = `SELECT state, count(*) FROM receipts WHERE iso_week = '2026-W48' GROUP BY state`

// explain returns the plan of query, run.
func explain(b *testing.B, pool *pgxpool.Pool, query string) string {
	b.StopTimer()
	defer b.StartTimer()
	rows, err := pool.Query(context.Background(), "EXPLAIN (ANALYZE, BUFFERS) "+query)
	if err != nil {
		b.Fatal(err)
	}
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			b.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	return plan.String()
}
