package run_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/snapshot"
)

// spinPasses is how many retry passes count as a spin: a run whose clock
// stood still (the fake clock moves only when the run sleeps) and kept
// passing. Far above what any of the skewed runs below needs.
const spinPasses = 5000

// passCounter is a log handler that counts the retry passes a run
// schedules and stops the run, as a spin, past spinPasses.
type passCounter struct {
	passes atomic.Int64
	stop   context.CancelFunc
}

func (h *passCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *passCounter) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *passCounter) WithGroup(string) slog.Handler            { return h }
func (h *passCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "retry pass scheduled" && h.passes.Add(1) > spinPasses {
		h.stop()
	}
	return nil
}

// A ledger whose clock (and the store's own, the clock it converts its
// times to) runs hours ahead of the run's, or behind it, with temporary
// failures that need a retry pass, a crashed run's claim taken over and a
// stalled lease: the run never spins and never sends a digest twice. It
// sends the week, or stops by its deadline with the rest left pending.
func TestRunUnderASkewedLedgerClockNeverSpins(t *testing.T) {
	t.Parallel()
	scenarios := []struct {
		name  string
		setup func(f *fixture, p *provider, ledgerSkew time.Duration) (lease time.Duration)
	}{
		{"temporary failures", func(f *fixture, p *provider, _ time.Duration) time.Duration {
			failing, retryAt := 0, f.clock.Now().Add(20*time.Minute)
			p.script = func(_ digest.Key, attempt int) (bool, error) {
				if attempt == 1 && failing < 3 {
					failing++
					return false, &digest.SendError{Class: digest.SendTemporary, RetryAt: retryAt, Err: errors.New("421 try later")}
				}
				return true, nil
			}
			return time.Minute
		}},
		{"crashed run's claim", func(f *fixture, p *provider, skew time.Duration) time.Duration {
			ctx := context.Background()
			var reqs []digest.ClaimRequest
			for r := range snapshot.Synthetic(12, runWeek, 1) {
				d, err := digest.Build(r, digest.Spec{Week: runWeek, Location: time.UTC, Type: "weekly_activity", Version: "v1"})
				if err != nil || d.Empty() || len(reqs) == 2 {
					continue
				}
				reqs = append(reqs, digest.ClaimRequest{Keys: f.kr.Candidates(d.Identity), Fingerprint: d.Fingerprint(), Week: runWeek, RunID: "crashed", Lease: time.Minute})
			}
			crashed := f.skewed(skew)
			res, err := crashed.Claim(ctx, reqs)
			if err != nil || res[0].Outcome != digest.OutcomeClaimed || res[1].Outcome != digest.OutcomeClaimed {
				f.t.Fatalf("the crashed run's claims: %+v %v", res, err)
			}
			// The first one's send started and landed: found by a look-up.
			if errs, err := crashed.StartSending(ctx, []digest.Fence{{Key: res[0].Key, Token: res[0].Token}}); err != nil || errs[0] != nil {
				f.t.Fatalf("start sending: %v %v", errs, err)
			}
			p.accepted[res[0].Key] = 1
			return time.Minute
		}},
		{"stalled lease", func(f *fixture, p *provider, _ time.Duration) time.Duration {
			stalled := false
			p.script = func(digest.Key, int) (bool, error) {
				if !stalled {
					stalled = true
					f.clock.Advance(20 * time.Minute) // past the lease
				}
				return true, nil
			}
			return 10 * time.Minute
		}},
	}
	for _, sc := range scenarios {
		for _, skew := range []struct {
			name string
			d    time.Duration // the ledger's clock minus the run's
		}{{"run ahead", -7 * time.Hour}, {"run behind", 7 * time.Hour}} {
			t.Run(sc.name+"/"+skew.name, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, 12)
				p := newProvider()
				lease := sc.setup(f, p, skew.d)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				count := &passCounter{stop: cancel}
				deadline := f.clock.Now().Add(time.Hour)
				r := f.runner(p, p, func(c *run.Config) {
					c.Lease, c.Deadline, c.Concurrency = lease, deadline, 1
					c.LookupDelay = 2 * time.Minute
					c.Logger = slog.New(count)
				})
				r.Ledger = f.skewed(skew.d)
				sum, err := r.Run(ctx)
				if n := count.passes.Load(); n > spinPasses {
					t.Fatalf("the run spun: %d retry passes by %v (deadline %v)", n, f.clock.Now(), deadline)
				}
				if err != nil {
					t.Fatalf("run: %v", err)
				}
				if _, dups := p.totals(); dups != 0 {
					t.Fatalf("%d digests sent twice", dups)
				}
				if sum.Pending == 0 && sum.Sent+sum.Reconciled != f.want {
					t.Fatalf("summary %+v: nothing pending, yet %d of %d sent", sum, sum.Sent+sum.Reconciled, f.want)
				}
				if sum.Pending > 0 && f.clock.Now().After(deadline) {
					t.Fatalf("stopped at %v with %d pending, past the deadline %v", f.clock.Now(), sum.Pending, deadline)
				}
				if sum.Sent+sum.Reconciled+sum.Pending != f.want {
					t.Fatalf("summary %+v: sent, reconciled and pending do not make the %d digests", sum, f.want)
				}
			})
		}
	}
}
