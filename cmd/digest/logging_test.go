package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"log/slog"
	"testing"
	"time"
)

// Durations are logged as Go duration strings, in groups too: slog's JSON
// handler would print integer nanoseconds.
func TestLoggerPrintsDurationsAsStrings(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	env := &Env{Getenv: func(string) string { return "" }, Stderr: &buf}
	st := register(flag.NewFlagSet("t", flag.ContinueOnError), env, gLog)
	newLogger(env, st).Info("x", "wait", 1500*time.Millisecond, slog.Group("summary", slog.Duration("duration", 2*time.Minute)))
	var line struct {
		Wait    any            `json:"wait"`
		Summary map[string]any `json:"summary"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if line.Wait != "1.5s" || line.Summary["duration"] != "2m0s" {
		t.Fatalf("wait %#v, summary.duration %#v; want \"1.5s\" and \"2m0s\"", line.Wait, line.Summary["duration"])
	}
}
