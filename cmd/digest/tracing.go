package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/weeklydigest/digest/internal/tracing"
	"github.com/weeklydigest/digest/run"
)

// traceFlushTimeout bounds how long a run's exit waits for its last spans
// to reach the collector: an unreachable one delays the exit by at most
// this, and never changes the exit code.
const traceFlushTimeout = 5 * time.Second

// runTracing is what startTracing set up for one run; the zero value is
// tracing off.
type runTracing struct {
	tracer *rootTracer // nil: off
	flush  func()      // exports the spans left, within traceFlushTimeout
}

// startTracing turns OpenTelemetry tracing on when the standard OTEL_*
// variables ask for it (tracing.Enabled; docs/operations.md, "Traces"),
// and returns it with the logger, which then names the span of each
// record made under one. A configuration the exporter refuses leaves
// tracing off with a warning: a run never fails for its traces.
func startTracing(ctx context.Context, env *Env, log *slog.Logger) (runTracing, *slog.Logger) {
	t, err := tracing.Start(ctx, env.Getenv, currentBuild().Version, log)
	if err != nil {
		log.Warn("tracing off: the OpenTelemetry configuration is unusable", "err", err)
	}
	if t == nil {
		return runTracing{flush: func() {}}, log
	}
	log = slog.New(tracing.LogHandler(log.Handler()))
	return runTracing{tracer: &rootTracer{Tracer: t.Tracer()}, flush: func() {
		// The run's context is cancelled on SIGTERM; the flush still runs.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceFlushTimeout)
		defer cancel()
		if err := t.Shutdown(ctx); err != nil {
			log.Warn("tracing: spans not delivered to the collector; the run's result stands", "err", err, "flush_timeout", traceFlushTimeout)
		}
	}}, log
}

// Tracer returns the run's tracer, nil when tracing is off (the run then
// makes no spans).
func (t runTracing) Tracer() run.Tracer {
	if t.tracer == nil {
		return nil
	}
	return t.tracer
}

// named returns log naming the run's span (trace_id, span_id) in every
// record: for the lines logged after the run ("run finished"), which no
// span encloses, so that the summary leads to the trace too.
func (t runTracing) named(log *slog.Logger) *slog.Logger {
	if t.tracer == nil {
		return log
	}
	t.tracer.mu.Lock()
	root := t.tracer.root
	t.tracer.mu.Unlock()
	if sc := trace.SpanContextFromContext(root); root != nil && sc.IsSampled() {
		return log.With("trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String())
	}
	return log
}

// rootTracer remembers the context of the first span a run starts: the
// run's own, the root of its trace.
type rootTracer struct {
	run.Tracer
	mu   sync.Mutex
	root context.Context
}

func (t *rootTracer) Start(ctx context.Context, name string, start time.Time, attrs ...slog.Attr) (context.Context, run.Span) {
	ctx, s := t.Tracer.Start(ctx, name, start, attrs...)
	t.mu.Lock()
	if t.root == nil {
		t.root = ctx
	}
	t.mu.Unlock()
	return ctx, s
}
