package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/internal/bench"
	"github.com/weeklydigest/digest/internal/e2etest"
	"github.com/weeklydigest/digest/internal/pgtest"
)

// TestMain builds the digest binary for "user", and lets the test binary
// stand in for digest-bench when "user" re-executes itself as the null
// SMTP server or the plain loop.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "null-smtp" || os.Args[1] == "plain-loop" || os.Args[1] == "limit-loop") {
		os.Exit(Main(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
	}
	e2etest.Main(m)
}

// A CI-sized "digest-bench user": the real binary against the null server
// processes (with and without CHUNKING), interleaved with the limit loop
// and the plain loop processes. It checks what each run did and that
// every measure is there, never how fast.
func TestUserSmall(t *testing.T) {
	t.Parallel()
	traces := t.TempDir()
	code, out, errOut := benchMain(t, map[string]string{"DIGEST_DATABASE_URL": pgtest.BaseURL()},
		"user", "--digest-bin", e2etest.Binary(), "--customers", "400", "--concurrency", "2", "--runs", "2", "--json", "--trace", traces)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var res bench.UserResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	want := len(e2etest.Wanted(t, 400, bench.DefaultWeek))
	if len(res.Samples) != 12 {
		t.Fatalf("%d samples, want job, limit, plain on each of 2 sinks, 2 rounds:\n%s", len(res.Samples), out)
	}
	for i, s := range res.Samples {
		kind := []string{"job", "limit", "plain"}[i%3]
		sink := []bench.Sink{bench.SinkChunking, bench.SinkNoChunking}[i/3%2]
		// The null server process counted each digest the run sent once,
		// and each loop sent as many as the run before it.
		if s.Kind != kind || s.Sink != sink || s.Messages != want || s.Received != int64(want) {
			t.Errorf("sample %d: %s on %s, %d messages, %d received by the null server; want %s on %s, %d and %d",
				i, s.Kind, s.Sink, s.Messages, s.Received, kind, sink, want, want)
		}
		if !(s.PerSecond > 0 && s.ProcessCPU > 0 && s.ServerCPU > 0) {
			t.Errorf("sample %d (%s): %.0f msg/s, CPU %.0f µs process, %.0f µs server; want all positive", i, s.Kind, s.PerSecond, s.ProcessCPU, s.ServerCPU)
		}
		if kind == "job" && !(s.PostgresCPU > 0 && s.Backends > 0 && s.LedgerBytes > 0 && s.WALBytes > 0) {
			t.Errorf("job sample %d: PostgreSQL %.0f µs over %d backends, ledger %.0f and WAL %.0f bytes/digest; want all positive",
				i, s.PostgresCPU, s.Backends, s.LedgerBytes, s.WALBytes)
		}
		if !(s.PeakRSS > 1 && s.PeakRSS < 1024) {
			t.Errorf("sample %d (%s): peak RSS %.1f MiB; want that of a process (1 MiB to 1 GiB)", i, s.Kind, s.PeakRSS)
		}
		if !(s.Cores > 0) {
			t.Errorf("sample %d (%s): %.2f CPU busy cores; want positive", i, s.Kind, s.Cores)
		}
		if kind == "job" && !(s.RunSeconds > 0 && s.Stages["send"].Busy > 0 && s.Stages["claim"].Busy > 0) {
			t.Errorf("job sample %d: run %.3fs, stages %v; want the summary's stage times", i, s.RunSeconds, s.Stages)
		}
	}
	for _, n := range []string{"run-1.trace", "run-2.trace", "run-3.trace", "run-4.trace"} {
		b, err := os.ReadFile(filepath.Join(traces, n))
		if err != nil || !strings.HasPrefix(string(b), "go 1.") {
			t.Errorf("--trace: %s: %d bytes (%v); want a Go execution trace", n, len(b), err)
		}
	}
	if len(res.Sinks) != 2 || res.MessageBytes < 1000 {
		t.Fatalf("%d sinks, message %d bytes; want 2 and a whole digest", len(res.Sinks), res.MessageBytes)
	}
	for _, k := range res.Sinks {
		if !(k.Ratio > 0 && k.LimitRatio > 0 && k.Job.PerSecond > 0 && k.Limit.PerSecond > 0 && k.Plain.PerSecond > 0) {
			t.Errorf("sink %s: ratios %.2f (plain) and %.2f (limit), medians %.0f, %.0f and %.0f msg/s; want all positive",
				k.Sink, k.Ratio, k.LimitRatio, k.Job.PerSecond, k.Limit.PerSecond, k.Plain.PerSecond)
		}
	}
}

// The table names every measure.
func TestUserTable(t *testing.T) {
	t.Parallel()
	job := bench.Sample{Kind: "job", RunSeconds: 2, Stages: map[string]bench.StageTimes{"send": {Busy: 7, WaitIn: 0.5, WaitOut: 0.5}, "claim": {Busy: 1, WaitOut: 1}}}
	job.Sink = bench.SinkChunking
	limit, plain := bench.Sample{Kind: "limit", Sink: bench.SinkChunking}, bench.Sample{Kind: "plain", Sink: bench.SinkChunking}
	res := bench.UserResult{Customers: 10, Concurrency: 1, Runs: 1, Samples: []bench.Sample{job, limit, plain},
		Sinks: []bench.SinkResult{{Sink: bench.SinkChunking, Job: job, Limit: limit, Plain: plain, Ratio: 0.8, LimitRatio: 0.4}}}
	var b strings.Builder
	if err := res.Print(&b); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"msg/s", "CPU µs/msg: process", "SMTP server", "PostgreSQL", "ledger B/digest", "WAL B/digest", "load1", "CPU busy cores", "job 1", "limit 1", "plain 1", "job median", "limit median", "plain median",
		"sink chunking: ratio to the limit 0.40, to the plain go-mail loop 0.80", "job 1 (sink chunking) stages (run 2.00s wall)", "waiting for input", "blocked on output", "350%", "claim"} {
		if !strings.Contains(b.String(), name) {
			t.Errorf("table lacks %q:\n%s", name, b.String())
		}
	}
}

func TestUserUsageErrors(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DIGEST_DATABASE_URL": "postgres://nowhere.invalid/x"}
	for _, args := range [][]string{{"user", "--nope"}, {"user", "extra"}, {"user", "--digest-bin", "/nonexistent/digest"},
		{"plain-loop"}, {"limit-loop"}, {"null-smtp", "--nope"}, {"user", "--sinks", "chunking,fast"}} {
		if code, _, errOut := benchMain(t, env, args...); code != 2 || !strings.HasPrefix(errOut, "digest-bench: ") {
			t.Errorf("digest-bench %v: exit %d, %q; want exit 2 with one line", args, code, errOut)
		}
	}
	if code, _, errOut := benchMain(t, nil, "user"); code != 2 || !strings.Contains(errOut, "DIGEST_DATABASE_URL") {
		t.Errorf("user without a database: exit %d, %q; want exit 2 naming DIGEST_DATABASE_URL", code, errOut)
	}
	code, out, _ := benchMain(t, nil, "user", "--help")
	if code != 0 || !strings.Contains(out, "-digest-bin") || !strings.Contains(out, "-runs") || !strings.Contains(out, "-json") {
		t.Errorf("user --help: exit %d\n%s", code, out)
	}
}
