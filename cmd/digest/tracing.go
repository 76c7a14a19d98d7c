package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/weeklydigest/digest/internal/tracing"
	"github.com/weeklydigest/digest/run"
)

// traceFlushTimeout bounds how long a run's exit waits for its last spans
// to reach the collector: an unreachable one delays the exit by at most
// this, and never changes the exit code.
const traceFlushTimeout = 5 * time.Second

// startTracing turns OpenTelemetry tracing on when the standard OTEL_*
// variables ask for it (tracing.Enabled; docs/operations.md, "Traces").
// It returns the run's tracer (nil when off: the run makes no spans), the
// logger, naming the span of each record made under one, and the function
// that flushes the spans at exit, SIGTERM included. A configuration the
// exporter refuses leaves tracing off with a warning: a run never fails
// for its traces.
func startTracing(ctx context.Context, env *Env, log *slog.Logger) (run.Tracer, *slog.Logger, func()) {
	t, err := tracing.Start(ctx, env.Getenv, currentBuild().Version, log)
	if err != nil {
		log.Warn("tracing off: the OpenTelemetry configuration is unusable", "err", err)
	}
	if t == nil {
		return nil, log, func() {}
	}
	log = slog.New(tracing.LogHandler(log.Handler()))
	return t.Tracer(), log, func() {
		// The run's context is cancelled on SIGTERM; the flush still runs.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceFlushTimeout)
		defer cancel()
		if err := t.Shutdown(ctx); err != nil {
			log.Warn("tracing: spans not delivered to the collector; the run's result stands", "err", err, "flush_timeout", traceFlushTimeout)
		}
	}
}
