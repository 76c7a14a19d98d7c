package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/weeklydigest/digest/run"
)

// startProgress draws a one-line progress display on stderr when it is a
// terminal, and returns the function that stops it.
func startProgress(env *Env, r *run.Runner) func() {
	return progressLine(env, func(el float64) string {
		p := r.Progress()
		return fmt.Sprintf("%d read · %d sent · %d duplicates · %d pending · %.0f/s",
			p.Digests, p.Sent, p.Duplicates, p.Pending, float64(p.Sent)/max(el, 0.001))
	})
}

// progressLine redraws line (given the seconds elapsed) on stderr four
// times a second when it is a terminal, and returns the function that
// stops it and clears the line.
func progressLine(env *Env, line func(elapsed float64) string) func() {
	if !isTerminal(env.Stderr) {
		return func() {}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		start := env.now()
		for {
			select {
			case <-stop:
				fmt.Fprint(env.Stderr, "\r\033[K")
				return
			case <-t.C:
				fmt.Fprint(env.Stderr, "\r\033[K"+line(env.now().Sub(start).Seconds()))
			}
		}
	}()
	return func() { close(stop); <-done }
}

// printSummary writes the run's summary as a table.
func printSummary(env *Env, cfg *run.Config, s run.Summary, headline string, checks ...checkResult) {
	w := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(env.Stdout, "%s\n%s %s %s, mode %s, shard %s\n", headline, cfg.Spec.Week, cfg.Spec.Type, cfg.Spec.Version, cfg.Mode, cfg.Shard)
	row := func(name string, v any) { fmt.Fprintf(w, "%v\t  %s\n", v, name) }
	row("sent", s.Sent)
	row("duplicates (already sent)", s.Duplicates)
	row("reconciled (found at the provider)", s.Reconciled)
	row("quarantined", s.Quarantined)
	row("held for review", s.Held)
	row("retryable (left to retry)", s.Retryable)
	row("retries (temporary failures)", s.Retries)
	row("failed (permanent)", s.Failed)
	row("skipped", s.Skipped)
	row("suppressed (unsubscribed)", s.Suppressed)
	if s.Invalid > 0 {
		row("invalid", s.Invalid)
	}
	row("pending at the end", s.Pending)
	if s.Observed > 0 {
		row("observed", s.Observed)
		for name, n := range s.Would {
			row("would be "+name, n)
		}
	}
	if s.Observed > 0 || s.Duplicates > 0 {
		for i, n := range s.RepeatAges() {
			row("repeat_"+run.AgeBucketNames[i], n)
		}
	}
	for _, c := range checks {
		row(c.name+" check", c.result)
	}
	row("duration", s.Duration.Round(time.Millisecond))
	row("claim latency p50", s.ClaimP50)
	row("claim latency p99", s.ClaimP99)
	w.Flush()
}
