package run

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// leaseMargin is how much earlier than the recorded lease expiry a send is
// cut off: the time between the cut and the ledger's takeover covers the
// finish of a send cut mid-exchange and clocks that differ between pods.
func leaseMargin(lease time.Duration) time.Duration { return lease / 10 }

// renewEvery is how often the run renews the leases it holds. A claim
// waiting in the pipeline so has at least three quarters of a lease left,
// more than the half a send may need (see Config.Validate).
func renewEvery(lease time.Duration) time.Duration { return lease / 4 }

// claimBatch is how many claims one Claim call takes: at most what the
// limiter sends in a quarter lease, so that what waits in the pipeline (a
// few batches) is sent well within the lease even before renewal.
func claimBatch(cfg *Config) int {
	if cfg.Rate <= 0 {
		return cfg.BatchSize
	}
	return min(cfg.BatchSize, max(1, int(cfg.Rate*cfg.Lease.Seconds()/4)))
}

// lease is the live lease of one claim: its expiry, moved on by renewals,
// and whether a renewal found it taken over.
//
// The expiry is by this process's clock: the time the claim (or the
// renewal) was asked plus the lease. The ledger started the lease no
// earlier than that, so the run's view ends no later than the ledger's in
// real time, however the clocks differ; the expiry the ledger reports is
// by its own clock (the database server's, or another machine's), and
// compared with this process's clock it would let a run whose clock is
// behind start sends after its lease had ended.
type lease struct {
	expires atomic.Int64 // unix nanoseconds, by this process's clock (Config.Now)
	lost    atomic.Bool
}

func (l *lease) set(t time.Time) {
	n := t.UnixNano()
	for {
		old := l.expires.Load()
		if n <= old || l.expires.CompareAndSwap(old, n) {
			return
		}
	}
}

func (l *lease) until() time.Time { return time.Unix(0, l.expires.Load()) }

// left is how long a send starting at now may take: to the recorded
// expiry, less the margin.
func (l *lease) left(now time.Time, d time.Duration) time.Duration {
	return l.until().Sub(now) - leaseMargin(d)
}

// heldClaims are the claims a pass holds and has not finished: claimed,
// waiting to be marked, sent or recorded. The renewer keeps their leases.
type heldClaims struct {
	mu sync.Mutex
	m  map[*item]struct{}
}

func (h *heldClaims) add(its []*item) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[*item]struct{}{}
	}
	for _, it := range its {
		h.m[it] = struct{}{}
	}
}

func (h *heldClaims) remove(it *item) {
	h.mu.Lock()
	delete(h.m, it)
	h.mu.Unlock()
}

func (h *heldClaims) list() []*item {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*item, 0, len(h.m))
	for it := range h.m {
		out = append(out, it)
	}
	return out
}

// renew renews the leases of the held claims every renewEvery until ctx
// ends, one fenced Renew call each time. A claim another run took over is
// marked lost and will not be sent; a failed call is logged and tried at
// the next tick (each send still stops at the lease it knows).
func (p *pass) renew(ctx context.Context) {
	r, cfg := p.runner, &p.runner.Config
	t := time.NewTicker(renewEvery(cfg.Lease))
	defer t.Stop()
	clk := r.stages.clock(StageRenew)
	defer clk.flush()
	for {
		clk.worked()
		select {
		case <-ctx.Done():
			clk.waitedIn()
			return
		case <-t.C:
		}
		clk.waitedIn()
		its := p.held.list()
		if len(its) == 0 {
			continue
		}
		fences := make([]digest.Fence, len(its))
		for i, it := range its {
			fences[i] = digest.Fence{Key: it.claim.Key, Token: it.claim.Token, Week: cfg.Spec.Week}
		}
		asked := cfg.Now()
		_, errs, err := r.Ledger.Renew(ctx, fences, cfg.Lease)
		r.counters.ledgerCalls.Add(1)
		if err != nil {
			if ctx.Err() == nil {
				cfg.Logger.WarnContext(ctx, "renewing leases failed; sends stop at the leases they have", "claims", len(its), "err", err)
			}
			continue
		}
		r.counters.renewals.Add(1)
		for i, it := range its {
			switch {
			case errs[i] == nil:
				it.lease.set(asked.Add(cfg.Lease)) // by this process's clock, see lease
			case errors.Is(errs[i], digest.ErrStaleClaim):
				it.lease.lost.Store(true)
			}
			// ErrNotRenewed: being written right now; next tick.
		}
	}
}
