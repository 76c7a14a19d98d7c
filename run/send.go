// The send stage: the senders that look up a maybe-sent claim, then send.

package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weeklydigest/digest/digest"
)

func (p *pass) sendLoop(ctx, graceCtx context.Context, sends *sendQueue, done *doneQueue) {
	clk := p.runner.stages.clock(StageSend)
	defer clk.flush()
	for {
		it, ok := sends.pop()
		clk.waitedIn()
		if !ok {
			return
		}
		p.deliver(ctx, graceCtx, it)
		clk.worked()
		done.put(it)
		clk.waitedOut()
	}
}

// deliver looks up a maybe-sent claim, then sends, and sets the item's
// Finish from the result.
func (p *pass) deliver(ctx, graceCtx context.Context, it *item) {
	r, cfg := p.runner, &p.runner.Config
	if it.claim.MaybeSent && r.Lookup != nil {
		lctx, ref, found, err := p.lookup(graceCtx, it)
		switch {
		case err != nil:
			r.counters.lookupErr.Add(1)
			if digest.ThrottledOf(err) {
				r.counters.throttled.Add(1)
			}
			it.finish = p.finishFor(it, digest.StateRetryable, "look-up failed: "+err.Error())
			it.finish.MaybeSent = true
			it.finish.NextAttempt = cfg.Backoff.RetryAt(cfg.Now(), it.claim.Attempt, digest.RetryAtOf(err))
			cfg.Logger.WarnContext(lctx, "look-up could not tell; not sent", "key", string(it.claim.Key), "err", err)
			return
		case found:
			r.counters.lookupFound.Add(1)
			it.finish = p.finishFor(it, digest.StateSent, "reconciled by look-up")
			it.finish.ProviderRef = ref
			it.reconciled = true
			cfg.Logger.InfoContext(lctx, "reconciled: the provider had accepted it", "key", string(it.claim.Key), "ref", ref)
			return
		}
		r.counters.lookupNotFound.Add(1)
		if ctx.Err() == nil {
			errs, err := r.Ledger.StartSending(graceCtx, []digest.Fence{{Key: it.claim.Key, Token: it.claim.Token, Week: r.Config.Spec.Week}})
			r.counters.ledgerCalls.Add(1)
			if err == nil && errs[0] != nil {
				err = errs[0]
			}
			if err != nil {
				if errors.Is(err, digest.ErrStaleClaim) {
					p.lost(lctx, it, err)
				} else {
					cfg.Logger.ErrorContext(lctx, "mark sending failed; left for the next run", "key", string(it.claim.Key), "err", err)
				}
				return // no Finish: the ledger keeps what it had
			}
		}
	}
	if ctx.Err() != nil {
		p.release(it, "interrupted before the send")
		return
	}
	if it.lease.lost.Load() {
		p.lost(ctx, it, digest.ErrStaleClaim) // found by a renewal; no Finish: it would be refused
		return
	}
	if p.halted.Load() {
		p.release(it, "not sent: the run stopped (mail server unusable or unreachable)")
		return
	}
	// The send must end before anyone else may take the claim over: it
	// starts only while the lease covers its worst case, and its deadline
	// (the mailer's connection deadline) is the lease's end less a margin.
	left := it.lease.left(cfg.Now(), cfg.Lease)
	if left <= 0 || left < cfg.SendWorstCase {
		p.release(it, "not sent: the lease would end before the send could")
		cfg.Logger.WarnContext(ctx, "lease too short for the send; given back unsent", "key", string(it.claim.Key), "left", left, "send_worst_case", cfg.SendWorstCase)
		return
	}
	sctx, cancel := context.WithTimeout(graceCtx, left)
	began := time.Now()
	ref, err := r.Mailer.Send(sctx, it.msg)
	cancel()
	if errors.Is(err, digest.ErrNoTime) {
		p.release(it, "not sent: the lease would end before the send could")
		cfg.Logger.WarnContext(ctx, "lease too short for the send; given back unsent", "key", string(it.claim.Key), "err", err)
		return
	}
	if err != nil {
		ctx = p.traceSendFailure(ctx, it, began, err)
	}
	if p.streak.note(err, circuitThreshold(cfg)) {
		p.halt(fmt.Errorf("%w: %d sends in a row failed to connect, the last with: %w", ErrMailerUnreachable, circuitThreshold(cfg), err))
	}
	if err == nil {
		it.handed = true
		it.finish = p.finishFor(it, digest.StateSent, "")
		it.finish.ProviderRef = ref
		return
	}
	switch digest.SendClassOf(err) {
	case digest.SendFatal:
		// Nothing was sent and nothing will be until the configuration
		// changes: give the claim back and stop the run.
		p.noteFailure(ctx, it, err)
		p.release(it, "not sent: "+err.Error())
		p.halt(fmt.Errorf("%w: %w", ErrMailerUnusable, err))
	case digest.SendTemporary:
		p.noteFailure(ctx, it, err)
		if digest.ThrottledOf(err) {
			r.counters.throttled.Add(1)
		}
		// The reason goes to the ledger: without the address a reply repeats.
		it.finish = p.finishFor(it, digest.StateRetryable, digest.RedactAddress(err.Error(), it.msg.To.Email))
		it.finish.NextAttempt = cfg.Backoff.RetryAt(cfg.Now(), it.claim.Attempt, digest.RetryAtOf(err))
	case digest.SendPermanent:
		p.noteFailure(ctx, it, err)
		it.finish = p.finishFor(it, digest.StateFailed, digest.RedactAddress(err.Error(), it.msg.To.Email))
		// The receipt keeps the address key: a bounce becomes a
		// suppression from the ledger alone.
		it.finish.AddressKey = r.Keyring.AddressKey(it.msg.To.Email)
	default:
		it.handed = true
		if r.Lookup == nil && cfg.Ambiguous == AmbiguousHold {
			it.finish = p.finishFor(it, digest.StateHeld, "ambiguous send: "+err.Error())
		} else {
			it.finish = p.finishFor(it, digest.StateRetryable, "ambiguous send: "+err.Error())
			it.finish.MaybeSent = true
			it.finish.NextAttempt = cfg.Backoff.RetryAt(cfg.Now(), 1, cfg.Now().Add(cfg.LookupDelay))
		}
		cfg.Logger.WarnContext(ctx, "send may have reached the provider", "key", string(it.claim.Key), "err", err)
	}
}
