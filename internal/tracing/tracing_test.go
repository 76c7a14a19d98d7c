package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestEnabledByTheStandardVariables(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{envEndpoint: "http://otel:4318"}, true},
		{map[string]string{envTracesEndpoint: "http://otel:4318/v1/traces"}, true},
		{map[string]string{envEndpoint: "http://otel:4318", envDisabled: "TRUE"}, false},
		{map[string]string{envEndpoint: "http://otel:4318", envDisabled: "false"}, true},
		{map[string]string{envEndpoint: "http://otel:4318", envExporter: "none"}, false},
		{map[string]string{envEndpoint: "http://otel:4318", envExporter: "otlp"}, true},
		{map[string]string{envDisabled: "false"}, false},
	} {
		if got := Enabled(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("Enabled(%v) = %v, want %v", tc.env, got, tc.want)
		}
	}
	log := slog.New(slog.DiscardHandler)
	if tr, err := Start(context.Background(), func(string) string { return "" }, "v0", log); tr != nil || err != nil {
		t.Errorf("Start without the variables = %v, %v; want nil, nil (no exporter)", tr, err)
	}
}

// The base endpoint gets the signal's path; the traces endpoint is used as
// it is; what is not an http(s) URL is refused, its password hidden.
func TestTracesURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env      map[string]string
		want     string
		wantFail bool
	}{
		{map[string]string{envEndpoint: "http://otel:4318"}, "http://otel:4318/v1/traces", false},
		{map[string]string{envEndpoint: "https://otel:4318/"}, "https://otel:4318/v1/traces", false},
		{map[string]string{envEndpoint: "http://a:4318", envTracesEndpoint: "http://b:4318/custom"}, "http://b:4318/custom", false},
		{map[string]string{envEndpoint: "otel:4317"}, "", true},
		{map[string]string{envTracesEndpoint: "ftp://user:secret@otel/"}, "", true},
	} {
		got, err := tracesURL(func(k string) string { return tc.env[k] })
		if got != tc.want || (err != nil) != tc.wantFail {
			t.Errorf("tracesURL(%v) = %q, %v; want %q, failure %v", tc.env, got, err, tc.want, tc.wantFail)
		}
		if err != nil && bytes.Contains([]byte(err.Error()), []byte("secret")) {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

// A record made under a sampled span names it; one made outside a span,
// or under one not sampled, names none.
func TestLogHandlerNamesTheSpan(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("run_id", "r")
	sampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample())).Tracer("t")
	dropped := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())).Tracer("t")
	ctx, s := sampled.Start(context.Background(), "s")
	log.InfoContext(ctx, "in")
	log.InfoContext(context.Background(), "out")
	ctx, _ = dropped.Start(context.Background(), "d")
	log.InfoContext(ctx, "unsampled")
	dec := json.NewDecoder(&buf)
	for _, want := range []struct{ msg, trace, span string }{
		{"in", s.SpanContext().TraceID().String(), s.SpanContext().SpanID().String()},
		{"out", "", ""},
		{"unsampled", "", ""},
	} {
		var l map[string]string
		if err := dec.Decode(&l); err != nil {
			t.Fatal(err)
		}
		if l["msg"] != want.msg || l["trace_id"] != want.trace || l["span_id"] != want.span || l["run_id"] != "r" {
			t.Errorf("record %v; want %+v and run_id r", l, want)
		}
	}
}

// The adapter keeps attribute kinds, the start time given, and records an
// error with its class.
func TestTracerAdapter(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tr := tracer{sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("t")}
	began := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	_, s := tr.Start(context.Background(), "send", began, slog.String("digest.key", "ab"), slog.Int("batch.size", 3), slog.Bool("retry", true))
	s.SetAttributes(slog.Float64("f", 1.5))
	s.RecordError(errTest{}, "temporary")
	s.End()
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	got := spans[0]
	want := map[attribute.Key]attribute.Value{"digest.key": attribute.StringValue("ab"), "batch.size": attribute.Int64Value(3),
		"retry": attribute.BoolValue(true), "f": attribute.Float64Value(1.5), "error.type": attribute.StringValue("temporary")}
	have := map[attribute.Key]attribute.Value{}
	for _, kv := range got.Attributes() {
		have[kv.Key] = kv.Value
	}
	for k, v := range want {
		if have[k] != v {
			t.Errorf("attribute %s = %v, want %v", k, have[k].String(), v.String())
		}
	}
	if !got.StartTime().Equal(began) || got.Status().Code.String() != "Error" || len(got.Events()) != 1 || got.Events()[0].Name != "exception" {
		t.Errorf("span start %v, status %v, events %v; want the given start, Error, an exception event", got.StartTime(), got.Status(), got.Events())
	}
}

type errTest struct{}

func (errTest) Error() string { return "421 try later" }
