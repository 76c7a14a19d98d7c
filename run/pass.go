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

// item is one digest travelling through a pass.
type item struct {
	digest      digest.Digest
	fingerprint string       // the digest's Fingerprint(), computed once
	keys        []digest.Key // the candidate keys, the week's pinned key id first
	enforce     bool         // claim and send; false: observe only (a cohort rollout)

	claim digest.ClaimResult // after the claim
	// claimed is when the claim call returned, by this process's clock:
	// a takeover it made happened no later (see route).
	claimed time.Time
	lease   lease           // the claim's live lease, renewed while held
	msg     *digest.Message // rendered, for a send
	// handed: the message went to the mailer and was accepted or may have
	// reached the provider (an ambiguous failure).
	handed bool

	// The end of the claim, for the finisher.
	finish     digest.Finish
	reconciled bool // found at the provider by a look-up, not sent
	released   bool // given back unsent on interrupt: pending, not a failure
}

// pass is one scan of the source: the pipeline of stages and the crash
// windows of its queues are described in the package documentation.
type pass struct {
	runner  *Runner
	number  int            // 1 for the first pass, which alone counts what it reads
	nextDue nextDueTracker // the earliest time a row left pending comes due
	held    heldClaims     // claims taken and not yet recorded: renewed by renew

	left   pendingCustomers // the customers this pass left pending
	streak connectStreak    // sends that failed to connect
	// settledByOthers counts keys a retry pass found already sent: another
	// run holding them finished (see route).
	settledByOthers atomic.Int64
	// pendingOnly: a retry pass that reads only the customers the run
	// left pending, so what it meets decided was decided elsewhere (a
	// re-read of everyone after an overflow meets this run's own too).
	pendingOnly bool
	ends        []digest.EndClaim // receipts to end (endClaim), read stage only
	noEnds      bool              // the week had no receipt to end when the pass began (weighEnds)
	absent      absentClaims      // receipts of customers not in the source, read stage only
	halt        func(error)       // stops the pass's intake, remembering why
	halted      atomic.Bool
}

// batchLinger is how long a batch waits to fill once its first item is
// there. Claims almost always find a full batch waiting; finishes arrive
// one send at a time, and lingering turns them into a few round trips per
// hundred digests instead of one per handful. A longer wait would only
// widen the window in which a crash leaves sent digests unrecorded (each
// then costs a look-up, never a duplicate).
const batchLinger = 50 * time.Millisecond

func (p *pass) run(ctx context.Context, q digest.SourceQuery) error {
	cfg := &p.runner.Config

	// graceCtx outlives ctx by the grace period: sends under way and the
	// ledger writes that record them finish after a SIGTERM.
	graceCtx, endGrace := context.WithCancel(context.WithoutCancel(ctx))
	defer endGrace()
	stopWatching := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(cfg.Grace, endGrace)
		context.AfterFunc(graceCtx, func() { t.Stop() })
	})
	defer stopWatching()

	// intakeCtx stops the reader and the claims when a later stage fails.
	intakeCtx, stopIntake := context.WithCancel(ctx)
	defer stopIntake()
	var haltErr error
	var haltOnce sync.Once
	p.halt = func(err error) {
		haltOnce.Do(func() {
			haltErr = err
			p.halted.Store(true)
			stopIntake()
		})
	}

	// The leases of the claims held are renewed until the pass has
	// recorded them all.
	renewCtx, stopRenew := context.WithCancel(graceCtx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		p.renew(renewCtx)
	}()
	defer func() {
		stopRenew()
		<-renewed
	}()

	items := make(chan []*item, 1)                   // built, batched for a claim
	claimed := make(chan []*item, 1)                 // claimed, not marked as sending
	sends := newSendQueue(startChunk(cfg))           // marked as sending, not yet sent
	done := newDoneQueue(cfg.BatchSize, batchLinger) // sent (or settled), not yet recorded

	errc := make(chan error, 3)
	go func() { errc <- p.read(intakeCtx, q, items) }()
	go func() {
		err := p.claim(intakeCtx, graceCtx, items, claimed, done)
		if err != nil {
			stopIntake()
		}
		errc <- err
	}()
	go func() {
		err := p.start(intakeCtx, graceCtx, claimed, sends, done)
		if err != nil {
			stopIntake()
		}
		errc <- err
	}()

	senders := make(chan struct{}, cfg.Concurrency)
	for range cfg.Concurrency {
		go func() {
			p.sendLoop(ctx, graceCtx, sends, done)
			senders <- struct{}{}
		}()
	}
	go func() {
		for range cfg.Concurrency {
			<-senders
		}
		done.close()
	}()
	finErr := p.finish(graceCtx, done)

	var first error
	for range 3 {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		first = finErr
	}
	if p.halted.Load() {
		return haltErr // the stages drained; set before they ended
	}
	return first
}

// read streams the source into items, building each digest, in batches
// of a claim's size: the claim stage is woken once a batch, not once a
// row. A batch goes when it is full, at the end of the source, or with
// the first row read batchLinger after the batch's first.
func (p *pass) read(ctx context.Context, q digest.SourceQuery, items chan<- []*item) (readErr error) {
	defer close(items)
	r, cfg := p.runner, &p.runner.Config
	clk := r.stages.clock(StageRead)
	defer clk.flush()
	size := claimBatch(cfg)
	var batch []*item
	var first time.Time
	hand := func() bool {
		// The ledger's suppression list, one look-up a batch, before any
		// claim (see unsuppressed).
		var err error
		if batch, err = p.unsuppressed(ctx, batch); err == nil {
			err = p.flushEnds(ctx, size)
		}
		if err != nil {
			if ctx.Err() == nil {
				readErr = err
			}
			return false
		}
		if len(batch) == 0 {
			batch = nil // all suppressed: nothing to claim
			return true
		}
		clk.worked()
		select {
		case items <- batch:
		case <-ctx.Done():
			return false
		}
		clk.waitedOut()
		batch = nil
		return true
	}
	if err := p.weighEnds(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // interrupted before the read: nothing done, nothing failed
		}
		return err
	}
	if err := p.absent.load(ctx, p); err != nil {
		if ctx.Err() != nil {
			return nil // interrupted before the read: nothing done, nothing failed
		}
		return err
	}
	complete := false // the source was read to its end
	defer func() {
		if len(batch) > 0 && ctx.Err() == nil {
			hand()
		}
		if complete && ctx.Err() == nil && readErr == nil {
			readErr = p.absent.end(ctx, p)
		}
		if ctx.Err() == nil && readErr == nil {
			readErr = p.flushEnds(ctx, 1)
		}
	}()
	for rec, err := range timedRows(clk, r.Source.Records(ctx, q)) {
		if ctx.Err() != nil {
			return nil
		}
		r.counters.sourceRows.Add(1)
		if err != nil {
			var bad *digest.BadRecordError
			if errors.As(err, &bad) {
				p.absent.unknown()
				// A source that cannot Check up front (the PostgreSQL
				// relations) reports bad records here: in strict mode they
				// fail the run like a record that cannot be built, never a
				// silent skip that leaves a customer without a digest.
				if p.number == 1 {
					r.counters.digests.Add(1) // a record read: accounted for as skipped or invalid
				}
				if p.number == 1 && cfg.Lenient {
					r.counters.skipped.Add(1)
					cfg.Logger.WarnContext(ctx, "bad snapshot record skipped", r.badRecordAttrs(bad)...)
				} else if p.number == 1 {
					r.counters.invalid.Add(1)
					cfg.Logger.ErrorContext(ctx, "bad snapshot record: no digest for it until it is fixed", r.badRecordAttrs(bad)...)
				}
				continue
			}
			return fmt.Errorf("read snapshot: %w", err)
		}
		if !q.Wants(rec.Customer.ID) {
			continue // a source that does not filter customers itself (a retry pass)
		}
		p.absent.seen(p, rec.Customer.ID)
		d, verdict, err := VerdictOf(rec, cfg.Spec, q.Shard, cfg.SendEmpty)
		if verdict == VerdictOtherShard {
			continue // a source that does not filter shards itself
		}
		if p.number == 1 {
			r.counters.digests.Add(1)
		}
		if verdict == VerdictSuppressed {
			if p.number == 1 {
				r.counters.suppressed.Add(1)
			}
			p.endClaim(digest.Identity{Customer: rec.Customer.ID, Week: cfg.Spec.Week, Type: cfg.Spec.Type, Version: cfg.Spec.Version}, reasonSuppressed)
			if err := p.flushEnds(ctx, size); err != nil {
				return err
			}
			continue // no claim, so no receipt to block a later week
		}
		if verdict == VerdictInvalid {
			if p.number == 1 {
				if cfg.Lenient {
					r.counters.skipped.Add(1)
				} else {
					r.counters.invalid.Add(1)
				}
				cfg.Logger.ErrorContext(ctx, "digest not built", "err", err)
			}
			continue
		}
		if verdict == VerdictEmpty {
			if p.number == 1 {
				r.counters.skipped.Add(1)
			}
			p.endClaim(d.Identity, reasonEmpty)
			if err := p.flushEnds(ctx, size); err != nil {
				return err
			}
			continue
		}
		if bad := r.unsendableAddress(ctx, rec); bad != nil {
			if ctx.Err() != nil {
				return nil // interrupted while asking the server: not a bad record
			}
			// Counted like a record that cannot be built: strict mode
			// fails the run, lenient skips it; never claimed.
			if p.number == 1 && cfg.Lenient {
				r.counters.skipped.Add(1)
				cfg.Logger.WarnContext(ctx, "bad snapshot record skipped", r.unsendableAttrs(bad, rec.Customer.Email)...)
			} else if p.number == 1 {
				r.counters.invalid.Add(1)
				cfg.Logger.ErrorContext(ctx, "bad snapshot record: no digest for it until it is fixed", r.unsendableAttrs(bad, rec.Customer.Email)...)
			}
			continue
		}
		it := &item{digest: d, fingerprint: d.Fingerprint(), keys: r.pinnedKeys.Candidates(d.Identity)}
		it.enforce = cfg.Mode == ModeEnforce && (cfg.EnforcePercent == nil || digest.InCohort(rec.Customer.ID, *cfg.EnforcePercent))
		if batch == nil {
			batch, first = make([]*item, 0, size), time.Now()
		}
		batch = append(batch, it)
		if len(batch) >= size || time.Since(first) >= batchLinger {
			if !hand() {
				return readErr
			}
		}
	}
	complete = true
	return nil
}
