// The finish stage: records the outcomes in batches.

package run

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// finish records outcomes in batches, one ledger call per batch. One
// goroutine gathers the next batch while this one writes the last, so the
// senders never wait for the write.
func (p *pass) finish(graceCtx context.Context, done *doneQueue) error {
	r, cfg := p.runner, &p.runner.Config
	batches := done.out
	var first error
	clk := r.stages.clock(StageFinish)
	defer clk.flush()
	for {
		clk.worked()
		batch, ok := <-batches
		if !ok {
			break
		}
		clk.waitedIn()
		var fs []digest.Finish
		var its []*item
		for _, it := range batch {
			if it.finish.State != "" {
				fs = append(fs, it.finish)
				its = append(its, it)
			}
		}
		if len(fs) == 0 {
			p.forget(batch)
			continue
		}
		fctx, span := cfg.Tracer.Start(graceCtx, spanFinishBatch, time.Time{}, slog.Int(attrBatchSize, len(fs)))
		errs, err := r.Ledger.Finish(fctx, fs)
		r.counters.ledgerCalls.Add(1)
		p.forget(batch) // recorded, or left to the ledger as it is
		if err != nil {
			endLedgerSpan(graceCtx, span, err)
			// The sends happened; their claims stay marked as sending, so
			// the next run looks each one up before sending again.
			cfg.Logger.ErrorContext(fctx, "recording outcomes failed", "count", len(fs), "err", err)
			if first == nil {
				first = fmt.Errorf("finish: %w", err)
			}
			continue
		}
		for i, it := range its {
			if errs[i] != nil {
				p.lost(fctx, it, errs[i])
				continue
			}
			p.count(fctx, it)
		}
		span.End()
	}
	return first
}

// forget stops renewing the leases of items whose claims have ended.
func (p *pass) forget(its []*item) {
	for _, it := range its {
		p.held.remove(it)
	}
}

func (p *pass) count(ctx context.Context, it *item) {
	c := &p.runner.counters
	switch it.finish.State {
	case digest.StateSent:
		if it.reconciled {
			c.reconciled.Add(1)
		} else {
			c.sent.Add(1)
		}
	case digest.StateRetryable:
		if !it.released {
			c.retries.Add(1)
		}
		c.pending.Add(1)
		c.retryable.Add(1)
		p.nextDue.offer(it.finish.NextAttempt)
		p.left.addRetryable(it.digest.Customer.ID, it.finish.NextAttempt)
	case digest.StateFailed:
		c.failed.Add(1)
	case digest.StateHeld:
		c.held.Add(1)
		p.runner.Config.Logger.WarnContext(ctx, "held for review", "key", string(it.finish.Key), "reason", it.finish.Reason)
	}
}
