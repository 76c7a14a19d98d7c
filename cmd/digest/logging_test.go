package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/run"
)

// Durations are logged as Go duration strings, in groups too: slog's JSON
// handler would print integer nanoseconds.
func TestLoggerPrintsDurationsAsStrings(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	env := &Env{Getenv: func(string) string { return "" }, Stderr: &buf}
	newLogger(env, slog.LevelInfo).Info("x", "wait", 1500*time.Millisecond, slog.Group("summary", slog.Duration("duration", 2*time.Minute)))
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

// The terminal table names repeats as the log does (repeat_<age>), in
// both modes, and shows the dry run's checks.
func TestSummaryTableNamesLikeTheLog(t *testing.T) {
	t.Parallel()
	cfg := &run.Config{Mode: run.ModeEnforce}
	for _, s := range []run.Summary{
		{Duplicates: 2, DuplicateAges: [4]int{2}},
		{Observed: 3, Repeats: [4]int{1}},
	} {
		var out bytes.Buffer
		printSummary(&Env{Stdout: &out}, cfg, s, "done", checkResult{"smtp", "ok"})
		for _, want := range []string{"repeat_under_5m", "repeat_beyond_horizon", "smtp check"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("table lacks %q:\n%s", want, out.String())
			}
		}
		if strings.Contains(out.String(), "repeats ") || strings.Contains(out.String(), "duplicate_") {
			t.Errorf("table uses another name for repeats:\n%s", out.String())
		}
	}
}
