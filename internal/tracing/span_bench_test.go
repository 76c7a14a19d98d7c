package tracing

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSpan measures the CPU time of one span as a run makes it (a
// claim batch: a size, then seven outcome counts), exported over OTLP/HTTP
// to a collector in the test that drops what it gets: the process's CPU
// time (user plus system, the exporter's goroutines included) over the
// spans made and exported, the flush at the end included. The batch
// processor's queue holds them all (OTEL_BSP_MAX_QUEUE_SIZE), so none is
// dropped unexported. A run's cost per digest is this times its spans per
// digest (docs/operations.md, "Traces").
func BenchmarkSpan(b *testing.B) {
	b.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "10000000")
	sink := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer sink.Close()
	env := map[string]string{envEndpoint: sink.URL}
	t, err := Start(context.Background(), func(k string) string { return env[k] }, "bench", slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	tr := t.Tracer()
	ctx, root := tr.Start(context.Background(), "digest run", time.Time{})
	outcomes := []slog.Attr{slog.Int("claim.claimed", 90), slog.Int("claim.already_sent", 4), slog.Int("claim.busy", 2),
		slog.Int("claim.not_due", 1), slog.Int("claim.quarantined", 1), slog.Int("claim.held", 1), slog.Int("claim.failed", 1)}
	b.ReportAllocs()
	before := cpuTime(b)
	for b.Loop() {
		_, s := tr.Start(ctx, "claim batch", time.Time{}, slog.Int("batch.size", 100))
		s.SetAttributes(outcomes...)
		s.End()
	}
	root.End()
	if err := t.Shutdown(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64((cpuTime(b)-before).Nanoseconds())/float64(b.N)/1e3, "cpu-µs/span")
}

// cpuTime returns this process's user plus system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
