package main

import (
	"log/slog"
	"strings"
)

// newLogger logs JSON lines to stderr, or readable text when stderr is a
// terminal. The level comes from DIGEST_LOG_LEVEL.
func newLogger(env *Env, st *settings) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(st.str("DIGEST_LOG_LEVEL")))); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if isTerminal(env.Stderr) {
		return slog.New(slog.NewTextHandler(env.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(env.Stderr, opts))
}
