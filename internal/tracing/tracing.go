// Package tracing exports a run's spans (run.Tracer) to an OpenTelemetry
// collector over OTLP/HTTP, and names the span of each log record made
// under one (LogHandler).
//
// Tracing is off unless the standard OpenTelemetry variables turn it on
// (Enabled); off, nothing of the SDK is created and a run does no span
// work. On, the SDK's own environment handling applies: OTEL_SERVICE_NAME
// and OTEL_RESOURCE_ATTRIBUTES (the resource), OTEL_TRACES_SAMPLER and its
// argument, OTEL_BSP_* (the batch processor), and OTEL_EXPORTER_OTLP_*
// (headers, timeout, compression, certificates).
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/weeklydigest/digest/internal/otlpenv"
	"github.com/weeklydigest/digest/internal/redact"
	"github.com/weeklydigest/digest/run"
)

// The standard variables that decide whether tracing is on.
const (
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envDisabled       = "OTEL_SDK_DISABLED"
	envExporter       = "OTEL_TRACES_EXPORTER"
)

// Enabled reports whether the standard variables ask for traces: an OTLP
// endpoint is set (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or
// OTEL_EXPORTER_OTLP_ENDPOINT), OTEL_SDK_DISABLED is not "true" and
// OTEL_TRACES_EXPORTER is not "none" (otlpenv.Enabled).
func Enabled(getenv func(string) string) bool { return otlpenv.Enabled(getenv, "traces") }

// Tracing is a tracer provider exporting spans in batches, in the
// background, to one OTLP/HTTP endpoint.
type Tracing struct {
	provider *sdktrace.TracerProvider
	failed   atomic.Int64 // exports that failed (the collector unreachable, say)
}

// Start starts tracing when Enabled says so, and returns nil otherwise.
// getenv decides whether and where to (the endpoints); the SDK reads the
// rest of its variables from the process's environment. The service is
// named "digest" unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say
// otherwise; version is its service.version. The SDK's own errors go to
// log: the first failed export as a warning, later ones only counted
// (Failed), so that an unreachable collector costs one log line, not one
// per batch of spans.
//
// The SDK's error handler and internal logger are process-wide: the last
// Start's log receives them.
func Start(ctx context.Context, getenv func(string) string, version string, log *slog.Logger) (*Tracing, error) {
	if !Enabled(getenv) {
		return nil, nil
	}
	endpoint, err := tracesURL(getenv)
	if err != nil {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter: %w", redact.Error(err, endpoint))
	}
	res, err := otlpenv.Resource(ctx, version)
	if err != nil {
		return nil, err
	}
	t := &Tracing{provider: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))}
	otel.SetLogger(logr.FromSlogHandler(log.With("component", "opentelemetry").Handler()))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		if t.failed.Add(1) == 1 {
			log.Warn("tracing: spans not exported (later failures are only counted); the run goes on", "endpoint", redact.URL(endpoint), "err", redact.Error(err, endpoint))
		}
	}))
	return t, nil
}

// tracesURL is where spans go: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it
// is, or OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces appended.
func tracesURL(getenv func(string) string) (string, error) { return otlpenv.URL(getenv, "traces") }

// Tracer returns the tracer a run reports its spans to.
func (t *Tracing) Tracer() run.Tracer {
	return tracer{t.provider.Tracer("github.com/weeklydigest/digest/run")}
}

// Failed returns how many exports of spans failed so far.
func (t *Tracing) Failed() int64 { return t.failed.Load() }

// Shutdown exports the spans not yet exported and stops the exporter,
// giving up when ctx is done: the caller bounds how long a run's exit may
// wait for an unreachable collector.
func (t *Tracing) Shutdown(ctx context.Context) error {
	err := t.provider.Shutdown(ctx)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err == nil && t.failed.Load() > 0 {
		err = fmt.Errorf("%d exports failed", t.failed.Load())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("flush gave up at its deadline: %w", err)
	}
	return err
}
