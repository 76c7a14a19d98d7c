package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// LogHandler wraps h so that a record made under a sampled span (its
// context carries one) names it: trace_id and span_id, in the hex the
// collector shows, so that a log line leads to its trace and back.
func LogHandler(h slog.Handler) slog.Handler { return traceIDs{h} }

type traceIDs struct{ slog.Handler }

func (h traceIDs) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceIDs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceIDs{h.Handler.WithAttrs(attrs)}
}

func (h traceIDs) WithGroup(name string) slog.Handler { return traceIDs{h.Handler.WithGroup(name)} }
