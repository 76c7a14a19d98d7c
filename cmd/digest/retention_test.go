package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestReplayHorizonSetting(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want time.Duration // 0: refused
	}{
		{"", 90 * 24 * time.Hour}, // the default
		{"90d", 90 * 24 * time.Hour},
		{"14d", 14 * 24 * time.Hour},
		{"336h", 14 * 24 * time.Hour},
		{"2160h", 90 * 24 * time.Hour},
		{"13d", 0},
		{"335h59m", 0},
		{"1h", 0},
		{"0d", 0},
		{"-30d", 0},
		{"1.5d", 0},
		{"ninety", 0},
		{"100000d", 0},
	} {
		env := &Env{Getenv: func(k string) string {
			if k == "DIGEST_REPLAY_HORIZON" {
				return c.in
			}
			return ""
		}, Stdout: io.Discard, Stderr: io.Discard}
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		st := register(fs, env, "prune")
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		got, err := st.replayHorizon()
		switch {
		case c.want == 0 && (err == nil || !isUsage(err) || !strings.Contains(err.Error(), "DIGEST_REPLAY_HORIZON")):
			t.Errorf("%q: %v, %v; want a usage error naming DIGEST_REPLAY_HORIZON", c.in, got, err)
		case c.want != 0 && (err != nil || got != c.want):
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}
