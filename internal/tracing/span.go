package tracing

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/weeklydigest/digest/run"
)

// tracer adapts an OpenTelemetry tracer to run.Tracer.
type tracer struct{ t trace.Tracer }

func (x tracer) Start(ctx context.Context, name string, start time.Time, attrs ...slog.Attr) (context.Context, run.Span) {
	opts := []trace.SpanStartOption{trace.WithAttributes(keyValues(attrs)...)}
	if !start.IsZero() {
		opts = append(opts, trace.WithTimestamp(start))
	}
	ctx, s := x.t.Start(ctx, name, opts...)
	return ctx, span{s}
}

// span adapts an OpenTelemetry span to run.Span.
type span struct{ s trace.Span }

func (x span) SetAttributes(attrs ...slog.Attr) { x.s.SetAttributes(keyValues(attrs)...) }

// RecordError records err as an exception event and its class as the
// span's error.type, the semantic conventions' attribute for it.
func (x span) RecordError(err error, class string) {
	x.s.RecordError(err)
	x.s.SetAttributes(attribute.String("error.type", class))
	x.s.SetStatus(codes.Error, class)
}

func (x span) End() { x.s.End() }

// keyValues converts a run's span attributes, kept as the value's kind.
func keyValues(attrs []slog.Attr) []attribute.KeyValue {
	kvs := make([]attribute.KeyValue, len(attrs))
	for i, a := range attrs {
		v := a.Value.Resolve()
		switch v.Kind() {
		case slog.KindBool:
			kvs[i] = attribute.Bool(a.Key, v.Bool())
		case slog.KindInt64:
			kvs[i] = attribute.Int64(a.Key, v.Int64())
		case slog.KindUint64:
			kvs[i] = attribute.Int64(a.Key, int64(v.Uint64()))
		case slog.KindFloat64:
			kvs[i] = attribute.Float64(a.Key, v.Float64())
		case slog.KindDuration:
			kvs[i] = attribute.Float64(a.Key, v.Duration().Seconds())
		default:
			kvs[i] = attribute.String(a.Key, v.String())
		}
	}
	return kvs
}
