package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/snapshot"
)

// BenchmarkRunTracing measures what tracing costs a run: "digest run" of
// N synthetic customers (DIGEST_TRACING_BENCH_N, default 2,000),
// in-process, on the embedded SQLite ledger and file outbox, with tracing
// off and on (exporting to a collector in the test that decodes each
// export, counts its spans and drops it; its CPU counts against "on"). It
// reports the process's CPU time (user plus system) per digest sent, and
// the spans and bytes exported per digest. docs/operations.md
// ("Traces") has the command and the figures:
//
//	go test -run '^$' -bench BenchmarkRunTracing -benchtime 2x -count 3 ./cmd/digest/
func BenchmarkRunTracing(b *testing.B) {
	n := 2000
	if s := os.Getenv("DIGEST_TRACING_BENCH_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	week := digest.ISOWeek{Year: 2026, Week: 40}
	snap := filepath.Join(b.TempDir(), "snapshot.jsonl")
	f, err := os.Create(snap)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := snapshot.WriteJSONL(f, snapshot.Synthetic(n, week, 1)); err != nil {
		b.Fatal(err)
	}
	f.Close()
	var exported, spans atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		exported.Add(int64(len(body)))
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			b.Error(err)
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				spans.Add(int64(len(ss.Spans)))
			}
		}
	}))
	defer sink.Close()

	for _, mode := range []string{"off", "on"} {
		b.Run("tracing="+mode, func(b *testing.B) {
			var cpu time.Duration
			sent := 0
			exported.Store(0)
			spans.Store(0)
			for b.Loop() {
				dir := b.TempDir()
				vars := map[string]string{
					"DIGEST_HMAC_KEYS":   testKeys,
					"DIGEST_LEDGER_PATH": filepath.Join(dir, "digest.db"),
					"DIGEST_OUTBOX_DIR":  filepath.Join(dir, "outbox"),
					"DIGEST_LOG_LEVEL":   "warn",
				}
				if mode == "on" {
					vars["OTEL_EXPORTER_OTLP_ENDPOINT"] = sink.URL
				}
				var errOut bytes.Buffer
				env := &Env{Getenv: func(k string) string { return vars[k] }, Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &errOut}
				before := processCPUTime(b)
				code := Main(context.Background(), []string{"run", "--snapshot", snap, "--week", week.String()}, env)
				cpu += processCPUTime(b) - before
				if code != 0 {
					b.Fatalf("exit %d\n%s", code, errOut.String())
				}
				sent += countOutbox(b, filepath.Join(dir, "outbox"))
			}
			if sent == 0 {
				b.Fatal("nothing sent")
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(sent), "cpu-µs/digest")
			b.ReportMetric(float64(exported.Load())/float64(sent), "exported-B/digest")
			b.ReportMetric(float64(spans.Load())/float64(sent), "spans/digest")
		})
	}
}

// processCPUTime returns this process's user plus system CPU time.
func processCPUTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func countOutbox(b *testing.B, dir string) int {
	m, err := filepath.Glob(filepath.Join(dir, "*.eml"))
	if err != nil {
		b.Fatal(err)
	}
	return len(m)
}
