package main

import (
	"log/slog"
)

// newLogger logs JSON lines to stderr, or readable text when stderr is a
// terminal, at level (DIGEST_LOG_LEVEL).
func newLogger(env *Env, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationString}
	if isTerminal(env.Stderr) {
		return slog.New(slog.NewTextHandler(env.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(env.Stderr, opts))
}

// durationString logs a time.Duration as a Go duration string ("1.5s"):
// slog's JSON handler would print integer nanoseconds, which nobody reads
// as a time. It applies inside groups too (the run summary).
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
