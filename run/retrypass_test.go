package run_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/snapshot"
)

// A retry pass reads only the customers it left pending, and claims only
// their keys: its source rows are at most the pending count, not the week.
func TestRetryPassReadsOnlyPendingCustomers(t *testing.T) {
	t.Parallel()
	const customers = 60
	f := newFixture(t, customers)
	p := newProvider()
	failing, retryAt := 0, f.clock.Now().Add(2*time.Hour) // one retry time: one retry pass
	p.script = func(_ digest.Key, attempt int) (bool, error) {
		if attempt == 1 && failing < 3 {
			failing++
			return false, &digest.SendError{Class: digest.SendTemporary, RetryAt: retryAt, Err: errors.New("421 try later")}
		}
		return true, nil
	}
	sum := f.run(f.runner(p, p, func(c *run.Config) { c.Deadline = f.clock.Now().Add(3 * time.Hour) }))
	if sum.Sent != f.want || sum.Pending != 0 || sum.Passes != 2 {
		t.Fatalf("summary %+v: want %d sent after one retry pass", sum, f.want)
	}
	if retryRows := sum.SourceRows - customers; retryRows > 3 {
		t.Fatalf("the retry pass read %d source rows (summary %+v); want at most the 3 pending", retryRows, sum)
	}
	// No bound on the ledger calls here: how many digests share a claim or
	// a mark depends on how fast the sends return, which load moves. What
	// the retry pass reads is the point, and the source rows above are it.
	if got := sum.Failures["temporary"]; got != 3 {
		t.Fatalf("failures %v: want 3 temporary", sum.Failures)
	}
}

// Keys a crashed run holds are claimed again at their lease's expiry: one
// quick recheck (a run started together may be finishing them), then one
// wake-up at the expiry, each reading only the held customers.
func TestRetryPassWaitsOutACrashedLeaseCheaply(t *testing.T) {
	t.Parallel()
	const customers, held = 40, 5
	f := newFixture(t, customers)
	ctx := context.Background()
	var reqs []digest.ClaimRequest
	for r := range snapshot.Synthetic(customers, runWeek, 1) {
		d, err := digest.Build(r, digest.Spec{Week: runWeek, Location: time.UTC, Type: "weekly_activity", Version: "v1"})
		if err != nil || d.Empty() || len(reqs) == held {
			continue
		}
		reqs = append(reqs, digest.ClaimRequest{Keys: f.kr.Candidates(d.Identity), Fingerprint: d.Fingerprint(), Week: runWeek, RunID: "crashed", Lease: 10 * time.Minute})
	}
	if _, err := f.store.Claim(ctx, reqs); err != nil { // claimed, never marked: resent without a look-up
		t.Fatal(err)
	}
	p := newProvider()
	start := f.clock.Now()
	sum := f.run(f.runner(p, p, func(c *run.Config) { c.Deadline = start.Add(time.Hour) }))
	if sum.Sent != f.want || sum.Pending != 0 {
		t.Fatalf("summary %+v: want all %d sent", sum, f.want)
	}
	if sum.Passes > 3 {
		t.Fatalf("%d passes waiting out a 10m lease; want at most 3 (first, one quick recheck, the expiry)", sum.Passes)
	}
	if retryRows := sum.SourceRows - customers; retryRows > held*(sum.Passes-1) {
		t.Fatalf("retry passes read %d source rows; want at most %d per pass", retryRows, held)
	}
	if waited := f.clock.Now().Sub(start); waited < 10*time.Minute {
		t.Fatalf("sent after %s, before the crashed run's lease ended", waited)
	}
}

// A fatal send error (here: the server offers no STARTTLS) stops the run at
// once with ErrMailerUnusable, gives the unsent claims back, and is logged
// once with its cause; the rest are not attempted.
func TestFatalSendStopsTheRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 40)
	p := newProvider()
	p.script = func(digest.Key, int) (bool, error) {
		return false, &digest.SendError{Class: digest.SendFatal, Kind: "starttls", Err: errors.New("target host does not support STARTTLS")}
	}
	var logs bytes.Buffer
	r := f.runner(p, p, func(c *run.Config) {
		c.Deadline = f.clock.Now().Add(time.Hour)
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	sum, err := r.Run(context.Background())
	if !errors.Is(err, run.ErrMailerUnusable) || !errors.Is(err, run.ErrConfig) || !strings.Contains(err.Error(), "STARTTLS") {
		t.Fatalf("Run = %v, want ErrMailerUnusable naming STARTTLS", err)
	}
	if sum.Passes != 1 || sum.Sent != 0 || sum.Failed != 0 {
		t.Fatalf("summary %+v: want one pass, nothing sent or failed", sum)
	}
	if n := len(p.sends); n > 2*r.Config.Concurrency {
		t.Fatalf("%d sends attempted after a fatal error, want at most %d", n, 2*r.Config.Concurrency)
	}
	if n := strings.Count(logs.String(), "does not support STARTTLS"); n != 1 {
		t.Fatalf("the cause is logged %d times, want once:\n%s", n, logs.String())
	}
	if st := f.states(); st[digest.StateFailed] != 0 || st[digest.StateHeld] != 0 || st[digest.StateSent] != 0 {
		t.Fatalf("receipt states %v: want only retryable or claimed", st)
	}
}

// A preflight failure stops the run before the week is pinned or claimed:
// fatal with ErrMailerUnusable, any other with ErrMailerUnreachable.
func TestPreflightRefusesBeforeClaiming(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"fatal", &digest.SendError{Class: digest.SendFatal, Kind: "auth", Err: errors.New("535 authentication failed")}, run.ErrMailerUnusable},
		{"down", &digest.SendError{Class: digest.SendTemporary, Kind: digest.KindConnect, Err: errors.New("connection refused")}, run.ErrMailerUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 10)
			p := newProvider()
			r := f.runner(p, p, func(c *run.Config) { c.Preflight = func(context.Context) error { return tc.err } })
			sum, err := r.Run(context.Background())
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "nothing claimed") {
				t.Fatalf("Run = %v, want %v", err, tc.want)
			}
			if len(p.sends) != 0 || sum.LedgerCalls != 0 {
				t.Fatalf("%d sends and %d ledger calls before the preflight refused", len(p.sends), sum.LedgerCalls)
			}
			if st := f.states(); len(st) != 0 {
				t.Fatalf("receipts %v: want none", st)
			}
		})
	}
}

// A server that goes down stops the run early: once the sends in a row
// that failed to connect reach the circuit threshold, not at the deadline.
// The failures are logged once and counted by kind.
func TestServerDownStopsTheRunEarly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 60)
	p := newProvider()
	p.script = func(digest.Key, int) (bool, error) {
		return false, &digest.SendError{Class: digest.SendTemporary, Kind: digest.KindConnect, Err: errors.New("dial tcp: connection refused")}
	}
	var logs bytes.Buffer
	r := f.runner(p, p, func(c *run.Config) {
		c.Deadline = f.clock.Now().Add(24 * time.Hour)
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	sum, err := r.Run(context.Background())
	if !errors.Is(err, run.ErrMailerUnreachable) {
		t.Fatalf("Run = %v, want ErrMailerUnreachable", err)
	}
	if sum.Passes != 1 || sum.Pending == 0 {
		t.Fatalf("summary %+v: want one pass, digests pending", sum)
	}
	if n := len(p.sends); n >= f.want {
		t.Fatalf("%d sends attempted against a server that is down; the circuit did not open", n)
	}
	if n := sum.Failures["temporary: connect"]; n < 8 {
		t.Fatalf("failures %v: want the connect failures counted", sum.Failures)
	}
	if n := strings.Count(logs.String(), "connection refused"); n != 2 { // the first failure, and the stop
		t.Fatalf("%d lines name the cause, want 2:\n%s", n, logs.String())
	}
}

// A week smaller than the circuit threshold stops after two passes in
// which every send failed to connect.
func TestServerDownSmallWeekStopsAfterTwoDeadPasses(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 6)
	p := newProvider()
	p.script = func(digest.Key, int) (bool, error) {
		return false, &digest.SendError{Class: digest.SendTemporary, Kind: digest.KindConnect, Err: errors.New("dial tcp: i/o timeout")}
	}
	r := f.runner(p, p, func(c *run.Config) { c.Deadline = f.clock.Now().Add(24 * time.Hour) })
	sum, err := r.Run(context.Background())
	if !errors.Is(err, run.ErrMailerUnreachable) || sum.Passes != 2 || sum.Pending != f.want {
		t.Fatalf("Run = %v, summary %+v: want ErrMailerUnreachable after 2 passes, %d pending", err, sum, f.want)
	}
}
