package main

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// Tracing is off unless the standard variables ask for it: a run then
// makes no tracer, exports nothing and logs no trace ids, also with an
// endpoint set when OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
func TestTracingOffLeavesLogsWithoutTraceIDs(t *testing.T) {
	t.Parallel()
	var exports atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { exports.Add(1) }))
	defer collector.Close()
	for _, otel := range []map[string]string{
		{},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL, "OTEL_SDK_DISABLED": "true"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.URL + "/v1/traces", "OTEL_TRACES_EXPORTER": "none"},
	} {
		dir := t.TempDir()
		vars := map[string]string{
			"DIGEST_HMAC_KEYS":   testKeys,
			"DIGEST_LEDGER_PATH": filepath.Join(dir, "digest.db"),
			"DIGEST_OUTBOX_DIR":  filepath.Join(dir, "outbox"),
		}
		maps.Copy(vars, otel)
		code, out, errOut := runMain(t, vars, "run", "--snapshot", filepath.Join("..", "..", "examples", "snapshot.jsonl"), "--week", "2026-W48")
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", otel, code, out, errOut)
		}
		if strings.Contains(errOut, "trace_id") || strings.Contains(errOut, "span_id") || strings.Contains(errOut, "tracing") {
			t.Errorf("%v: tracing off, yet the log names traces:\n%s", otel, errOut)
		}
		env := &Env{Getenv: func(k string) string { return vars[k] }}
		log := slog.New(slog.DiscardHandler)
		traces, logged := startTracing(context.Background(), env, log)
		traces.flush()
		if traces.Tracer() != nil || logged != log || traces.named(log) != log {
			t.Errorf("%v: tracing off, yet a tracer (%v) or another logger", otel, traces.Tracer())
		}
	}
	if n := exports.Load(); n != 0 {
		t.Errorf("the collector got %d requests from runs with tracing off", n)
	}
}

// "digest run --help" names the standard variables that turn tracing on
// and off, and the bound on the flush at exit.
func TestRunHelpNamesTheOTELVariables(t *testing.T) {
	t.Parallel()
	_, out, _ := runMain(t, nil, "run", "--help")
	for _, want := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME",
		"OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "not DIGEST_ settings", "at most " + traceFlushTimeout.String()} {
		if !strings.Contains(out, want) {
			t.Errorf("digest run --help does not say %q", want)
		}
	}
}
