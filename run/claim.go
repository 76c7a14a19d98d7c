// The claim stage: one ledger call per batch of keys, and the routing of
// each key by the ledger's answer.

package run

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// claim takes items in batches, claims them in one ledger call per batch,
// and routes each by outcome. The claims whose send is to start go on to
// the start stage as one batch, so that the next claim overlaps them.
// A claim call under way when ctx is cancelled (SIGTERM) runs on under
// graceCtx: cancelled, it could commit its claims unseen and leave them locked
// until their lease ends; finished, its claims are given back by the start
// stage.
func (p *pass) claim(ctx, graceCtx context.Context, items <-chan []*item, claimed chan<- []*item, done *doneQueue) error {
	defer close(claimed)
	r, cfg := p.runner, &p.runner.Config
	clk := r.stages.clock(StageClaim)
	defer clk.flush()
	for {
		clk.worked()
		batch, ok := <-items
		clk.waitedIn()
		if !ok {
			return nil
		}
		if ctx.Err() != nil {
			continue // interrupted: drain, claim nothing more
		}
		var enforce, observe []*item
		for _, it := range batch {
			if it.enforce {
				enforce = append(enforce, it)
			} else if p.number == 1 {
				observe = append(observe, it)
			}
		}
		if err := p.observe(ctx, observe); err != nil {
			return err
		}
		if len(enforce) == 0 {
			continue
		}
		reqs := make([]digest.ClaimRequest, len(enforce))
		for i, it := range enforce {
			// The parts only tell a quarantine which part changed: the
			// pinned key's checks, the same in every run of the week.
			reqs[i] = digest.ClaimRequest{Keys: it.keys, Fingerprint: it.fingerprint, Parts: r.pinnedKeys.FingerprintParts(&it.digest),
				Week: cfg.Spec.Week, RunID: cfg.RunID, Lease: cfg.Lease, Type: cfg.Spec.Type, Version: cfg.Spec.Version}
		}
		bctx, span := cfg.Tracer.Start(graceCtx, spanClaimBatch, time.Time{}, slog.Int(attrBatchSize, len(reqs)))
		t0, asked := time.Now(), cfg.Now()
		res, err := r.Ledger.Claim(bctx, reqs)
		r.claimLatency.Observe(time.Since(t0), len(reqs))
		r.counters.ledgerCalls.Add(1)
		if err != nil {
			endLedgerSpan(ctx, span, err)
			if ctx.Err() != nil {
				continue
			}
			return fmt.Errorf("claim: %w", err)
		}
		span.SetAttributes(outcomeAttrs(res)...)
		answered := cfg.Now()
		var start []*item
		for i, it := range enforce {
			it.claim, it.claimed = res[i], answered
			if it.claim.Outcome == digest.OutcomeClaimed {
				// By this process's clock, from when it asked: the ledger
				// started the lease no earlier, whatever its own clock
				// says (it.claim.LeaseExpires is by the ledger's clock,
				// which may run ahead of this one).
				it.lease.set(asked.Add(cfg.Lease))
			}
			if p.route(bctx, it, done) {
				start = append(start, it)
			}
		}
		span.End()
		if len(start) > 0 {
			p.held.add(start)
			clk.worked()
			claimed <- start
			clk.waitedOut()
		}
	}
}

// route counts a claim outcome and reports whether the item goes on to be
// sent. Maybe-sent claims go to a sender directly, which looks up first.
func (p *pass) route(ctx context.Context, it *item, done *doneQueue) (start bool) {
	r, cfg := p.runner, &p.runner.Config
	c, first := &r.counters, p.number == 1
	res := it.claim
	switch res.Outcome {
	case digest.OutcomeClaimed:
		if err := p.render(it); err != nil {
			it.finish = p.finishFor(it, digest.StateFailed, "render: "+err.Error())
			done.put(it)
			return false
		}
		if !res.MaybeSent || cfg.Ambiguous == AmbiguousResend && r.Lookup == nil {
			return true
		}
		if r.Lookup == nil {
			it.finish = p.finishFor(it, digest.StateHeld, "may have reached the provider; no look-up configured")
			done.put(it)
			return false
		}
		// The delay runs from the takeover by this process's clock (when
		// the claim call returned: the takeover was no later), not from
		// res.TakenOverAt, the ledger's: a ledger clock behind this one
		// would make the look-up come too early and miss the send.
		if at := it.claimed.Add(cfg.LookupDelay); !res.TakenOverAt.IsZero() && cfg.Now().Before(at) {
			// Taken over from a run whose send had started: that send
			// may still land. Give the claim back until a look-up can
			// see it.
			it.finish = p.finishFor(it, digest.StateRetryable, "taken over from a send that may still be landing; look-up after the delay")
			it.finish.MaybeSent, it.finish.NextAttempt, it.released = true, at, true
			done.put(it)
			return false
		}
		return true // the sender looks up first
	case digest.OutcomeAlreadySent:
		if !first {
			p.settledByOthers.Add(1) // pending before: another run finished it
			p.settledElsewhere()
		}
		if first {
			c.duplicates.Add(1)
			if !res.SentAt.IsZero() {
				c.dupAges[AgeBucket(cfg.Now().Sub(res.SentAt), cfg.ReplayHorizon)].Add(1)
			}
		}
	case digest.OutcomeBusy:
		// Another run holds the lease (NextAttempt: its expiry). A live
		// run renews it and most likely finishes long before; a crashed
		// one frees it at the expiry. So look again after busyRecheck
		// while that may pay (the first pass, where runs started together
		// are met, and after a pass that found such keys settled by their
		// holder), else at the expiry: waiting out a crashed run's lease
		// then costs one claim of the pending keys, not one per tenth.
		c.pending.Add(1)
		// NextAttempt only schedules the next pass: the claim then
		// decides again (see recheckAt).
		recheck := p.recheckAt(it)
		if quick := cfg.Now().Add(busyRecheck(cfg.Lease)); r.busyQuick && quick.Before(recheck) {
			recheck = quick
		}
		p.nextDue.offer(recheck)
		p.left.add(it.digest.Customer.ID, recheck)
	case digest.OutcomeNotDue:
		c.pending.Add(1)
		c.retryable.Add(1)
		recheck := p.recheckAt(it)
		p.nextDue.offer(recheck)
		p.left.addRetryable(it.digest.Customer.ID, recheck)
	case digest.OutcomeQuarantined:
		if !first {
			p.settledElsewhere()
		}
		if first {
			c.quarantined.Add(1)
			cfg.Logger.WarnContext(ctx, "quarantined: fingerprint differs from the receipt's; not sent", "key", string(res.Key), "fingerprint", it.fingerprint)
		}
	case digest.OutcomeHeld:
		if first {
			c.held.Add(1)
		} else {
			p.settledElsewhere()
		}
	case digest.OutcomeFailed:
		if first {
			c.failed.Add(1)
		} else {
			p.settledElsewhere()
		}
	default:
		cfg.Logger.ErrorContext(ctx, "unknown claim outcome", "key", string(res.Key), "outcome", int(res.Outcome))
	}
	return false
}

// settledElsewhere counts a key a retry pass of pending customers found
// decided: it was busy or not due when this run last met it, and another
// run (or an operator) settled it since.
func (p *pass) settledElsewhere() {
	if p.pendingOnly {
		p.runner.counters.settledByOthers.Add(1)
	}
}

// lost counts a claim another run took over before this one recorded it,
// and says what this run did with it.
func (p *pass) lost(ctx context.Context, it *item, err error) {
	c, log := &p.runner.counters, p.runner.Config.Logger
	c.lost.Add(1)
	switch {
	case it.handed && it.finish.State == digest.StateSent:
		c.lostAfterSend.Add(1)
		log.ErrorContext(ctx, "claim lost to another run after this one sent it; the other run looks it up", "key", string(it.claim.Key), "err", err)
	case it.handed:
		c.lostAfterSend.Add(1)
		log.ErrorContext(ctx, "claim lost to another run after this one's send may have reached the provider; the other run looks it up", "key", string(it.claim.Key), "err", err)
	default:
		log.ErrorContext(ctx, "claim lost to another run; not sent by this one", "key", string(it.claim.Key), "err", err)
	}
}

// release gives an unsent claim back: retryable, due now. A claim that was
// maybe-sent stays so.
func (p *pass) release(it *item, reason string) {
	it.finish = p.finishFor(it, digest.StateRetryable, reason)
	it.released = true
	it.finish.NextAttempt = p.runner.Config.Now()
	it.finish.MaybeSent = it.claim.MaybeSent
}

// recheckAt is when a retry pass claims again a key the ledger answered
// busy or not due: at the answer's NextAttempt (the lease's end, the
// retry's due time), which is later than the call by the ledger's clock,
// and so by this process's when the store converts it (ledger.CallTimes).
// A NextAttempt no later than the answer came back is on another clock
// (a store whose clock is not this run's, a ledger whose clock runs
// behind): it says nothing about when the key comes due, and taken as it
// is it would start the next pass at once, and every one after it, until
// the ledger's clock reached it. The key is looked at again after
// busyRecheck instead, as a key another run holds.
func (p *pass) recheckAt(it *item) time.Time {
	if at := it.claim.NextAttempt; at.After(it.claimed) {
		return at
	}
	return it.claimed.Add(busyRecheck(p.runner.Config.Lease))
}

// busyRecheck is how soon a retry pass looks again at keys another run
// holds, while that run may be finishing them (see route): a tenth of the
// lease, between 1 and 30 seconds.
func busyRecheck(lease time.Duration) time.Duration {
	return min(max(lease/10, time.Second), 30*time.Second)
}
