package run

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
			reqs[i] = digest.ClaimRequest{Keys: it.keys, Fingerprint: it.fingerprint, Week: cfg.Spec.Week, RunID: cfg.RunID, Lease: cfg.Lease}
		}
		t0, asked := time.Now(), cfg.Now()
		res, err := r.Ledger.Claim(graceCtx, reqs)
		r.claimLatency.Observe(time.Since(t0), len(reqs))
		r.counters.ledgerCalls.Add(1)
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			return fmt.Errorf("claim: %w", err)
		}
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
			if p.route(it, done) {
				start = append(start, it)
			}
		}
		if len(start) > 0 {
			p.held.add(start)
			clk.worked()
			claimed <- start
			clk.waitedOut()
		}
	}
}

// startMarkers is how many chunks may be marked at once. The window of
// marked claims stays two chunks (sendQueue), but two marks under way let
// the senders use it while the ledger is slow to answer: one mark at a
// time, the senders wait whenever they send a chunk faster than the ledger
// marks the next.
const startMarkers = 2

// start marks the claimed batches as sending, a chunk at a time, and hands
// them to the senders. After a failure it keeps draining claimed, so that
// the claim stage ends; the claims it drops stay "claimed, send not
// started".
func (p *pass) start(ctx, graceCtx context.Context, claimed <-chan []*item, sends *sendQueue, done *doneQueue) error {
	defer sends.close()
	chunk := startChunk(&p.runner.Config)
	chunks := make(chan []*item)
	var (
		first    error
		failOnce sync.Once
		failed   atomic.Bool // a mark failed: mark no more
		wg       sync.WaitGroup
	)
	for range startMarkers {
		wg.Go(func() {
			clk := p.runner.stages.clock(StageStart)
			defer clk.flush()
			for {
				c, ok := <-chunks
				clk.waitedIn()
				if !ok {
					return
				}
				if failed.Load() {
					continue
				}
				if err := p.startSending(ctx, graceCtx, c, sends, done, clk); err != nil {
					failOnce.Do(func() { first = err })
					failed.Store(true)
				}
				clk.worked()
			}
		})
	}
	for batch := range claimed {
		for len(batch) > 0 {
			n := min(chunk, len(batch))
			chunks <- batch[:n]
			batch = batch[n:]
		}
	}
	close(chunks)
	wg.Wait()
	return first
}

// startChunk is how many claims one StartSending call marks. Marked and not
// yet sent is the window in which a crash leaves digests that must be
// looked up (or, without a look-up, held for an operator) although they
// were never sent. A chunk of a few sends' worth keeps that window small
// while the mark still costs a fraction of a round trip per digest:
// with the defaults (batch 100, concurrency 4) the window is about 25+25+4
// digests and the pass makes about 0.06 ledger round trips per digest.
// At a limited rate the chunk is what the limiter sends in half a second
// (at least 1): the marked claims wait for the limiter, not for the
// senders, so at 5 msg/s a crash leaves a handful marked instead of ~54.
func startChunk(cfg *Config) int {
	chunk := min(cfg.BatchSize, max(4*cfg.Concurrency, 25))
	if cfg.Rate > 0 {
		chunk = min(chunk, max(1, int(cfg.Rate/2)))
	}
	return chunk
}

// route counts a claim outcome and reports whether the item goes on to be
// sent. Maybe-sent claims go to a sender directly, which looks up first.
func (p *pass) route(it *item, done *doneQueue) (start bool) {
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
			cfg.Logger.Warn("quarantined: fingerprint differs from the receipt's; not sent", "key", string(res.Key), "fingerprint", it.fingerprint)
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
		cfg.Logger.Error("unknown claim outcome", "key", string(res.Key), "outcome", int(res.Outcome))
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

func (p *pass) render(it *item) error {
	unsub := ""
	if p.runner.Unsubscribe != nil {
		unsub = p.runner.Unsubscribe(it.digest.Customer.ID)
	}
	msg, err := p.runner.Renderer.Message(&it.digest, it.claim.Key, unsub) // the header's URI, also shown in the body
	if err != nil {
		return err
	}
	it.msg = msg
	return nil
}

func (p *pass) finishFor(it *item, s digest.State, reason string) digest.Finish {
	return digest.Finish{Key: it.claim.Key, Token: it.claim.Token, State: s, Reason: reason, RunID: p.runner.Config.RunID, Week: p.runner.Config.Spec.Week}
}

// startSending marks the batch's fresh claims as sending in one ledger call,
// once the "marked, not yet sent" window has room for them, and hands them
// to the senders. Maybe-sent claims skip the mark here: the
// sender marks each one after its look-up says "not found".
func (p *pass) startSending(ctx, graceCtx context.Context, start []*item, sends *sendQueue, done *doneQueue, clk *stageClock) error {
	if len(start) == 0 {
		return nil
	}
	clk.worked()
	sends.reserve(len(start)) // the window is full: wait for the senders
	clk.waitedOut()
	if ctx.Err() != nil {
		// Interrupted between claim and send: give the claims back now,
		// so the next run need not wait for the lease.
		sends.release(len(start))
		for _, it := range start {
			p.release(it, "interrupted before the send")
			done.put(it)
		}
		return nil
	}
	var fresh []*item
	var fences []digest.Fence
	for _, it := range start {
		if it.claim.MaybeSent && p.runner.Lookup != nil {
			continue
		}
		fresh = append(fresh, it)
		fences = append(fences, digest.Fence{Key: it.claim.Key, Token: it.claim.Token, Week: p.runner.Config.Spec.Week})
	}
	if len(fences) > 0 {
		errs, err := p.runner.Ledger.StartSending(graceCtx, fences)
		p.runner.counters.ledgerCalls.Add(1)
		if err != nil {
			sends.release(len(start))
			// The claims stay "claimed, send not started": the next run
			// takes them over when the lease ends and sends without review.
			return fmt.Errorf("mark sending: %w", err)
		}
		for i, it := range fresh {
			if errs[i] != nil {
				it.claim.Token = -1 // lost: never send
				p.held.remove(it)
				p.lost(it, errs[i])
			}
		}
	}
	send := start[:0:0]
	for _, it := range start {
		if it.claim.Token != -1 {
			send = append(send, it)
		}
	}
	sends.release(len(start) - len(send))
	sends.push(send)
	return nil
}

// lost counts a claim another run took over before this one recorded it,
// and says what this run did with it.
func (p *pass) lost(it *item, err error) {
	c, log := &p.runner.counters, p.runner.Config.Logger
	c.lost.Add(1)
	switch {
	case it.handed && it.finish.State == digest.StateSent:
		c.lostAfterSend.Add(1)
		log.Error("claim lost to another run after this one sent it; the other run looks it up", "key", string(it.claim.Key), "err", err)
	case it.handed:
		c.lostAfterSend.Add(1)
		log.Error("claim lost to another run after this one's send may have reached the provider; the other run looks it up", "key", string(it.claim.Key), "err", err)
	default:
		log.Error("claim lost to another run; not sent by this one", "key", string(it.claim.Key), "err", err)
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
		ref, found, err := r.Lookup.Lookup(graceCtx, it.claim.Key)
		switch {
		case err != nil:
			r.counters.lookupErr.Add(1)
			if digest.ThrottledOf(err) {
				r.counters.throttled.Add(1)
			}
			it.finish = p.finishFor(it, digest.StateRetryable, "look-up failed: "+err.Error())
			it.finish.MaybeSent = true
			it.finish.NextAttempt = cfg.Backoff.RetryAt(cfg.Now(), it.claim.Attempt, digest.RetryAtOf(err))
			cfg.Logger.Warn("look-up could not tell; not sent", "key", string(it.claim.Key), "err", err)
			return
		case found:
			r.counters.lookupFound.Add(1)
			it.finish = p.finishFor(it, digest.StateSent, "reconciled by look-up")
			it.finish.ProviderRef = ref
			it.reconciled = true
			cfg.Logger.Info("reconciled: the provider had accepted it", "key", string(it.claim.Key), "ref", ref)
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
					p.lost(it, err)
				} else {
					cfg.Logger.Error("mark sending failed; left for the next run", "key", string(it.claim.Key), "err", err)
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
		p.lost(it, digest.ErrStaleClaim) // found by a renewal; no Finish: it would be refused
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
		cfg.Logger.Warn("lease too short for the send; given back unsent", "key", string(it.claim.Key), "left", left, "send_worst_case", cfg.SendWorstCase)
		return
	}
	sctx, cancel := context.WithTimeout(graceCtx, left)
	ref, err := r.Mailer.Send(sctx, it.msg)
	cancel()
	if errors.Is(err, digest.ErrNoTime) {
		p.release(it, "not sent: the lease would end before the send could")
		cfg.Logger.Warn("lease too short for the send; given back unsent", "key", string(it.claim.Key), "err", err)
		return
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
	switch digest.ClassOf(err) {
	case digest.ClassFatal:
		// Nothing was sent and nothing will be until the configuration
		// changes: give the claim back and stop the run.
		p.noteFailure(it, err)
		p.release(it, "not sent: "+err.Error())
		p.halt(fmt.Errorf("%w: %w", ErrMailerUnusable, err))
	case digest.ClassTemporary:
		p.noteFailure(it, err)
		if digest.ThrottledOf(err) {
			r.counters.throttled.Add(1)
		}
		// The reason goes to the ledger: without the address a reply repeats.
		it.finish = p.finishFor(it, digest.StateRetryable, digest.RedactAddress(err.Error(), it.msg.To.Email))
		it.finish.NextAttempt = cfg.Backoff.RetryAt(cfg.Now(), it.claim.Attempt, digest.RetryAtOf(err))
	case digest.ClassPermanent:
		p.noteFailure(it, err)
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
		cfg.Logger.Warn("send may have reached the provider", "key", string(it.claim.Key), "err", err)
	}
}

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
		errs, err := r.Ledger.Finish(graceCtx, fs)
		r.counters.ledgerCalls.Add(1)
		p.forget(batch) // recorded, or left to the ledger as it is
		if err != nil {
			// The sends happened; their claims stay marked as sending, so
			// the next run looks each one up before sending again.
			cfg.Logger.Error("recording outcomes failed", "count", len(fs), "err", err)
			if first == nil {
				first = fmt.Errorf("finish: %w", err)
			}
			continue
		}
		for i, it := range its {
			if errs[i] != nil {
				p.lost(it, errs[i])
				continue
			}
			p.count(it)
		}
	}
	return first
}

// forget stops renewing the leases of items whose claims have ended.
func (p *pass) forget(its []*item) {
	for _, it := range its {
		p.held.remove(it)
	}
}

func (p *pass) count(it *item) {
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
		p.runner.Config.Logger.Warn("held for review", "key", string(it.finish.Key), "reason", it.finish.Reason)
	}
}

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
			p.sample(its[i])
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
func (p *pass) sample(it *item) {
	cfg := &p.runner.Config
	if cfg.ObserveSample < 0 || p.runner.counters.sampled.Add(1) > int64(cfg.ObserveSample) {
		return
	}
	attrs := []any{"key", string(it.keys[0])}
	if cfg.ObserveAddresses {
		attrs = append(attrs, "to", it.digest.Customer.Email)
	}
	cfg.Logger.Info("would send", attrs...)
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
