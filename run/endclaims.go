package run

import (
	"context"
	"fmt"

	"github.com/weeklydigest/digest/digest"
)

// Reasons a run ends a receipt it will not send (see endClaim).
const (
	reasonSuppressed = "suppressed after claim: not sent"
	reasonEmpty      = "nothing to send after claim: not sent"
	reasonAbsent     = "customer not in the week's source after claim: not sent"
)

// maxAbsentCandidates bounds the unfinished receipts a first pass holds to
// find those of customers no longer in the source (absentClaims). A crash
// leaves at most the claims of the run's read-ahead; more are retryable
// receipts of a mail outage, which the pass meets and drops. Past it the
// pass does not look, and says so.
const maxAbsentCandidates = 100_000

// endClaim asks, for a customer the first pass does not claim (suppressed,
// or nothing to send), that a receipt a crashed run left claimed or
// retryable be ended (digest.ClaimEnder): no run will claim it again, so
// it would stay claimed for ever. Enforce mode only; batched, sent with
// flushEnds.
func (p *pass) endClaim(id digest.Identity, reason string) {
	cfg := &p.runner.Config
	if p.noEnds || p.number != 1 || cfg.Mode != ModeEnforce || cfg.EnforcePercent != nil && !digest.InCohort(id.Customer, *cfg.EnforcePercent) {
		return
	}
	if _, ok := p.runner.Ledger.(digest.ClaimEnder); !ok {
		return
	}
	p.ends = append(p.ends, digest.EndClaim{Keys: p.runner.pinnedKeys.Candidates(id), Week: cfg.Spec.Week, Reason: reason, RunID: cfg.RunID})
}

// weighEnds asks the ledger, as the first pass of an enforce run begins,
// whether the week has any receipt EndClaims could end: claimed or
// retryable, of any shard, type or version (digest.WeekReceipts's
// WeekUnfinished, from counts the ledger keeps). With none, the pass asks
// for no ends at all (noEnds): a week's first run would otherwise send
// EndClaims a primary-key probe for every customer with nothing to send,
// and list the week's unfinished receipts (absentClaims) for nothing.
//
// What the count cannot see is what is claimed after it, by another run
// of the week under way now: a live claim, which EndClaims leaves alone
// anyway. Should that run die and its lease end while this pass reads, the
// receipt stays claimed for the next run to end (status counts it claimed,
// never sent, until then), as it would had this pass read its customer
// first.
func (p *pass) weighEnds(ctx context.Context) error {
	r, cfg := p.runner, &p.runner.Config
	lister, ok := r.Ledger.(digest.WeekReceipts)
	if _, ends := r.Ledger.(digest.ClaimEnder); !ok || !ends || p.number != 1 || cfg.Mode != ModeEnforce {
		return nil
	}
	r.counters.ledgerCalls.Add(1)
	n, err := lister.WeekUnfinished(ctx, cfg.Spec.Week)
	if err != nil {
		return fmt.Errorf("count the week's unfinished receipts: %w", err)
	}
	p.noEnds = n == 0
	return nil
}

// flushEnds ends the receipts endClaim collected, in one ledger call, when
// there are at least min of them.
func (p *pass) flushEnds(ctx context.Context, min int) error {
	if len(p.ends) == 0 || len(p.ends) < min {
		return nil
	}
	r, log := p.runner, p.runner.Config.Logger
	r.counters.ledgerCalls.Add(1)
	ended, err := r.Ledger.(digest.ClaimEnder).EndClaims(ctx, p.ends)
	p.ends = p.ends[:0]
	if err != nil {
		if ctx.Err() != nil {
			// Interrupted (SIGTERM, the deadline): the claims stay as
			// they were, for the next run to end; the run reports what it
			// left, not a failure.
			return nil
		}
		return fmt.Errorf("end the claims of customers not sent to: %w", err)
	}
	for _, e := range ended {
		r.counters.endedClaims.Add(1)
		if e.To == digest.StateHeld {
			log.WarnContext(ctx, "claim of a crashed run ended held: its send may have started; look it up (digest review)", "key", string(e.Key), "from", string(e.From))
			continue
		}
		log.InfoContext(ctx, "claim of a crashed run ended: not sent", "key", string(e.Key), "from", string(e.From), "to", string(e.To))
	}
	return nil
}

// absentClaims finds the receipts a crashed run left claimed (or
// retryable) for customers no longer in the week's source: deleted from
// it, or out of the week. No run reads them, so none would end them. The
// first pass lists the week's unfinished receipts before it reads (load),
// drops each of a customer it reads (seen), and at the end of a complete
// read ends the rest (end): failed with reasonAbsent, or held when the
// send may have started, as for a suppressed customer (EndClaims).
//
// It looks only when the pass can know every customer of the week: a run
// of the whole week (no shard), whose pin is the week's only one
// (receipts store the week, not the digest type or content version: a
// key of another type would look absent), that met no bad record (whose
// customer it cannot name). Otherwise the claims stay for a run that can,
// or for an operator (status counts them claimed).
type absentClaims struct {
	keys map[digest.Key]bool // unfinished receipts not yet seen; nil: not looking
}

// load lists the week's claimed and retryable receipts, when the first
// pass of an enforce run can tell which of them no customer of the source
// has.
func (a *absentClaims) load(ctx context.Context, p *pass) error {
	r, cfg := p.runner, &p.runner.Config
	lister, ok := r.Ledger.(digest.WeekReceipts)
	if _, ends := r.Ledger.(digest.ClaimEnder); !ok || !ends || p.noEnds || p.number != 1 || cfg.Mode != ModeEnforce || !cfg.Shard.All() {
		return nil
	}
	keys := map[digest.Key]bool{}
	for _, state := range []digest.State{digest.StateClaimed, digest.StateRetryable} {
		var after digest.Key
		for {
			r.counters.ledgerCalls.Add(1)
			page, err := lister.WeekKeys(ctx, cfg.Spec.Week, state, after, 1000)
			if err != nil {
				return fmt.Errorf("list the week's unfinished receipts: %w", err)
			}
			for _, k := range page {
				keys[k] = true
			}
			if len(keys) > maxAbsentCandidates {
				cfg.Logger.InfoContext(ctx, "not looking for claims of customers no longer in the source: too many unfinished receipts", "more_than", maxAbsentCandidates)
				return nil
			}
			if len(page) < 1000 {
				break
			}
			after = page[len(page)-1]
		}
	}
	if len(keys) == 0 {
		return nil
	}
	if only, err := p.onlyPin(ctx, lister); err != nil || !only {
		if err == nil {
			cfg.Logger.InfoContext(ctx, "not looking for claims of customers no longer in the source: the week has other digest types or versions")
		}
		return err
	}
	a.keys = keys
	return nil
}

// onlyPin reports whether the run's pin is the only one of its week.
func (p *pass) onlyPin(ctx context.Context, lister digest.WeekReceipts) (bool, error) {
	r, cfg := p.runner, &p.runner.Config
	r.counters.ledgerCalls.Add(1)
	pins, err := lister.WeekPins(ctx, cfg.Spec.Week)
	if err != nil {
		return false, fmt.Errorf("list the week's pins: %w", err)
	}
	for _, pin := range pins {
		if pin.Type != cfg.Spec.Type || pin.Version != cfg.Spec.Version {
			return false, nil
		}
	}
	return true, nil
}

// seen drops the receipts of a customer the pass read.
func (a *absentClaims) seen(p *pass, customer string) {
	if a.keys == nil {
		return
	}
	cfg := &p.runner.Config
	id := digest.Identity{Customer: customer, Week: cfg.Spec.Week, Type: cfg.Spec.Type, Version: cfg.Spec.Version}
	if id.Validate() != nil {
		a.unknown() // its receipt, if any, cannot be told from an absent customer's
		return
	}
	for _, k := range p.runner.pinnedKeys.Candidates(id) {
		delete(a.keys, k)
	}
}

// unknown stops looking: the pass read a record whose customer it cannot
// name.
func (a *absentClaims) unknown() { a.keys = nil }

// end asks, after a complete read, that the receipts no customer of the
// source had be ended (sent with the pass's last flushEnds), if the
// week's pin is still the only one.
func (a *absentClaims) end(ctx context.Context, p *pass) error {
	if len(a.keys) == 0 {
		return nil
	}
	keys := a.keys
	a.keys = nil
	if only, err := p.onlyPin(ctx, p.runner.Ledger.(digest.WeekReceipts)); err != nil || !only {
		if ctx.Err() != nil {
			return nil // interrupted: as in flushEnds
		}
		return err
	}
	cfg := &p.runner.Config
	for k := range keys {
		p.ends = append(p.ends, digest.EndClaim{Keys: []digest.Key{k}, Week: cfg.Spec.Week, Reason: reasonAbsent, RunID: cfg.RunID})
	}
	return nil
}
