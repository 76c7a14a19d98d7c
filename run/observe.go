// An observe-mode pass: what the ledger would decide, recorded and sampled.

package run

import (
	"context"
	"fmt"

	"github.com/weeklydigest/digest/digest"
)

// observe records an observe-mode batch: what the ledger would decide, and
// how long ago each key was last seen.
func (p *pass) observe(ctx context.Context, its []*item) error {
	if len(its) == 0 {
		return nil
	}
	r, cfg := p.runner, &p.runner.Config
	obs := make([]digest.Observation, len(its))
	for i, it := range its {
		obs[i] = digest.Observation{Keys: it.keys, Fingerprint: it.fingerprint, Week: cfg.Spec.Week, RunID: cfg.RunID}
	}
	res, err := r.Ledger.Observe(ctx, obs)
	r.counters.ledgerCalls.Add(1)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("observe: %w", err)
	}
	now := cfg.Now()
	for i, o := range res {
		r.counters.observed.Add(1)
		if int(o.Would) < len(r.counters.would) {
			r.counters.would[o.Would].Add(1)
		}
		if o.Would == digest.OutcomeClaimed {
			p.sample(ctx, its[i])
		}
		if !o.PreviousAt.IsZero() {
			r.counters.repeats[AgeBucket(now.Sub(o.PreviousAt), cfg.ReplayHorizon)].Add(1)
		}
	}
	return nil
}

// sample logs one would-be recipient of an observe run, while the sample
// is not full: its key (the one a claim would create or find) and, only
// when asked for, its address.
func (p *pass) sample(ctx context.Context, it *item) {
	cfg := &p.runner.Config
	if cfg.ObserveSample < 0 || p.runner.counters.sampled.Add(1) > int64(cfg.ObserveSample) {
		return
	}
	attrs := []any{"key", string(it.keys[0])}
	if cfg.ObserveAddresses {
		attrs = append(attrs, "to", it.digest.Customer.Email)
	}
	cfg.Logger.InfoContext(ctx, "would send", attrs...)
}
