// The start stage: marks fresh claims as sending a chunk at a time and
// renders each digest for the senders.

package run

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weeklydigest/digest/digest"
)

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
		mctx, span := p.runner.Config.Tracer.Start(graceCtx, spanStartChunk, time.Time{}, slog.Int(attrBatchSize, len(fences)))
		errs, err := p.runner.Ledger.StartSending(mctx, fences)
		p.runner.counters.ledgerCalls.Add(1)
		if err != nil {
			endLedgerSpan(ctx, span, err)
			sends.release(len(start))
			// The claims stay "claimed, send not started": the next run
			// takes them over when the lease ends and sends without review.
			return fmt.Errorf("mark sending: %w", err)
		}
		for i, it := range fresh {
			if errs[i] != nil {
				it.claim.Token = -1 // lost: never send
				p.held.remove(it)
				p.lost(mctx, it, errs[i])
			}
		}
		span.End()
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
