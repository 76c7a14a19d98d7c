package main

import (
	"context"
	"encoding/json"
	"math"
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

// userJSON runs "digest-bench user --json" on the real binary with args
// and returns its result and its output.
func userJSON(t *testing.T, args ...string) (bench.UserResult, string) {
	t.Helper()
	args = append([]string{"user", "--digest-bin", e2etest.Binary(), "--json"}, args...)
	code, out, errOut := benchMain(t, map[string]string{"DIGEST_DATABASE_URL": pgtest.BaseURL()}, args...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var res bench.UserResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	return res, out
}

// A CI-sized "digest-bench user": the real binary against the null server
// processes (with and without CHUNKING), interleaved with the limit loop
// and the plain loop processes. It checks what each run did and that
// every measure is there, never how fast.
func TestUserSmall(t *testing.T) {
	t.Parallel()
	traces := t.TempDir()
	res, out := userJSON(t, "--customers", "400", "--concurrency", "2", "--runs", "2", "--trace", traces)
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
	// No --rtt: no proxy, no bound.
	if res.Mailer != "smtp" || res.RTTMillis != 0 || res.Samples[0].ProxiedBytes != 0 || res.Sinks[0].Bound != 0 || res.Sinks[0].BoundRatio != 0 {
		t.Errorf("without --rtt: mailer %q, RTT %gms, %d bytes proxied, bound %.0f/s (%.2f); want smtp and no proxy, no bound",
			res.Mailer, res.RTTMillis, res.Samples[0].ProxiedBytes, res.Sinks[0].Bound, res.Sinks[0].BoundRatio)
	}
	for _, k := range res.Sinks {
		if !(k.Ratio > 0 && k.LimitRatio > 0 && k.Job.PerSecond > 0 && k.Limit.PerSecond > 0 && k.Plain.PerSecond > 0) {
			t.Errorf("sink %s: ratios %.2f (plain) and %.2f (limit), medians %.0f, %.0f and %.0f msg/s; want all positive",
				k.Sink, k.Ratio, k.LimitRatio, k.Job.PerSecond, k.Limit.PerSecond, k.Plain.PerSecond)
		}
	}
}

// A CI-sized "digest-bench user --rtt": the sink behind the delay proxy.
// It checks that every sender went through the proxy (the bytes and
// connections it forwarded during each run), that the run did its week,
// and the report's fields: connections, RTT, the bound C/RTT and the
// fraction of it reached; never how fast.
func TestUserAtADistance(t *testing.T) {
	t.Parallel()
	const conns = 2
	res, out := userJSON(t, "--customers", "120", "--concurrency", "2", "--runs", "1",
		"--sinks", "chunking", "--rtt", "5ms", "--mailer", "smtp")
	want := len(e2etest.Wanted(t, 120, bench.DefaultWeek))
	if res.Mailer != "smtp" || res.RTTMillis != 5 || res.Concurrency != conns || len(res.Samples) != 3 || len(res.Sinks) != 1 {
		t.Fatalf("mailer %q, RTT %gms, %d connections, %d samples, %d sinks; want smtp, 5ms, %d, 3 and 1:\n%s",
			res.Mailer, res.RTTMillis, res.Concurrency, len(res.Samples), len(res.Sinks), conns, out)
	}
	for i, s := range res.Samples {
		kind := []string{"job", "limit", "plain"}[i]
		if s.Kind != kind || s.Messages != want || s.Received != int64(want) {
			t.Errorf("sample %d: %s, %d messages, %d received; want %s, %d and %d", i, s.Kind, s.Messages, s.Received, kind, want, want)
		}
		// Every message went through the proxy, over at most C connections
		// (and the job's preflight check of the server, one more).
		most := int64(conns)
		if kind == "job" {
			most++
		}
		if s.ProxiedBytes < int64(want*res.MessageBytes/2) || s.ProxiedConns < 1 || s.ProxiedConns > most {
			t.Errorf("sample %d (%s): the proxy forwarded %d bytes over %d connections; want at least %d messages of about %d bytes over 1 to %d",
				i, s.Kind, s.ProxiedBytes, s.ProxiedConns, want, res.MessageBytes, most)
		}
	}
	k := res.Sinks[0]
	if k.Sink != bench.SinkChunking || k.RoundTrips != 1 || math.Abs(k.Bound-conns/0.005) > 1e-6 {
		t.Errorf("sink %s: %d round trips a message, bound %g/s; want chunking, 1, C/RTT = %g/s", k.Sink, k.RoundTrips, k.Bound, conns/0.005)
	}
	if !(k.Job.PerSecond > 0) || math.Abs(k.BoundRatio-k.Job.PerSecond/k.Bound) > 1e-9 {
		t.Errorf("job %.1f digests/s, %.4f of the bound %.0f/s; want positive and their ratio", k.Job.PerSecond, k.BoundRatio, k.Bound)
	}
	if !(k.Job.RunSeconds > 0) || math.Abs(k.RunBoundRatio-float64(want)/k.Job.RunSeconds/k.Bound) > 1e-9 {
		t.Errorf("job run %.3fs, %.4f of the bound over it; want positive and %d digests ÷ it ÷ the bound", k.Job.RunSeconds, k.RunBoundRatio, want)
	}
	var raw map[string]any
	_ = json.Unmarshal([]byte(out), &raw)
	sink, _ := raw["sinks"].([]any)[0].(map[string]any)
	for _, f := range []string{"bound_per_second", "bound_ratio", "run_bound_ratio", "round_trips_per_message"} {
		if _, ok := sink[f]; !ok {
			t.Errorf("--json: the sink lacks %q: %v", f, sink)
		}
	}
	for _, f := range []string{"rtt_ms", "mailer", "concurrency"} {
		if _, ok := raw[f]; !ok {
			t.Errorf("--json lacks %q", f)
		}
	}
}

// The table names every measure.
func TestUserTable(t *testing.T) {
	t.Parallel()
	job := bench.Sample{Kind: "job", RunSeconds: 2, Stages: map[string]bench.StageTimes{"send": {Busy: 7, WaitIn: 0.5, WaitOut: 0.5}, "claim": {Busy: 1, WaitOut: 1}}}
	job.Sink = bench.SinkChunking
	limit, plain := bench.Sample{Kind: "limit", Sink: bench.SinkChunking}, bench.Sample{Kind: "plain", Sink: bench.SinkChunking}
	res := bench.UserResult{Customers: 10, Concurrency: 1, Runs: 1, Mailer: "smtp", Samples: []bench.Sample{job, limit, plain},
		Sinks: []bench.SinkResult{{Sink: bench.SinkChunking, Job: job, Limit: limit, Plain: plain, Ratio: 0.8, LimitRatio: 0.4}}}
	var b strings.Builder
	if err := res.Print(&b); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mailer smtp, RTT 0 (loopback, no delay proxy)", "msg/s", "CPU µs/msg: process", "SMTP server", "PostgreSQL", "ledger B/digest", "WAL B/digest", "load1", "CPU busy cores", "job 1", "limit 1", "plain 1", "job median", "limit median", "plain median",
		"sink chunking: ratio to the limit 0.40, to the plain go-mail loop 0.80", "job 1 (sink chunking) stages (run 2.00s wall)", "waiting for input", "blocked on output", "350%", "claim"} {
		if !strings.Contains(b.String(), name) {
			t.Errorf("table lacks %q:\n%s", name, b.String())
		}
	}
}

// At a distance the table gives C, the RTT, the bound and its fraction.
func TestUserTableAtADistance(t *testing.T) {
	t.Parallel()
	job := bench.Sample{Kind: "job", Sink: bench.SinkChunking, PerSecond: 250}
	res := bench.UserResult{Customers: 10, Concurrency: 16, Runs: 1, Mailer: "smtp", RTTMillis: 50, Samples: []bench.Sample{job},
		Sinks: []bench.SinkResult{{Sink: bench.SinkChunking, Job: job, RoundTrips: 1, Bound: 320, BoundRatio: 250.0 / 320, RunBoundRatio: 0.9}}}
	var b strings.Builder
	if err := res.Print(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mailer smtp, RTT 50ms", "sink chunking at RTT 50ms: 250 digests/s over C = 16 connections; bound C/(1×RTT) = 320/s", "0.78 of the bound (0.90 over the run's own time"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestUserUsageErrors(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DIGEST_DATABASE_URL": "postgres://nowhere.invalid/x"}
	for _, args := range [][]string{{"user", "--nope"}, {"user", "extra"}, {"user", "--digest-bin", "/nonexistent/digest"},
		{"plain-loop"}, {"limit-loop"}, {"null-smtp", "--nope"}, {"user", "--sinks", "chunking,fast"},
		{"user", "--rtt", "-5ms"}, {"user", "--rtt", "fast"}} {
		if code, _, errOut := benchMain(t, env, args...); code != 2 || !strings.HasPrefix(errOut, "digest-bench: ") {
			t.Errorf("digest-bench %v: exit %d, %q; want exit 2 with one line", args, code, errOut)
		}
	}
	// The HTTP providers' mailers are not measured yet: refused, naming
	// the one accepted.
	if code, _, errOut := benchMain(t, env, "user", "--mailer", "postmark"); code != 2 || !strings.Contains(errOut, `--mailer "postmark": want smtp`) {
		t.Errorf("user --mailer postmark: exit %d, %q; want exit 2 naming smtp", code, errOut)
	}
	if code, _, errOut := benchMain(t, nil, "user"); code != 2 || !strings.Contains(errOut, "DIGEST_DATABASE_URL") {
		t.Errorf("user without a database: exit %d, %q; want exit 2 naming DIGEST_DATABASE_URL", code, errOut)
	}
	code, out, _ := benchMain(t, nil, "user", "--help")
	if code != 0 || !strings.Contains(out, "-digest-bin") || !strings.Contains(out, "-runs") || !strings.Contains(out, "-json") ||
		!strings.Contains(out, "-rtt") || !strings.Contains(out, "-mailer") {
		t.Errorf("user --help: exit %d\n%s", code, out)
	}
}
