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
)

// endClaim asks, for a customer the first pass does not claim (suppressed,
// or nothing to send), that a receipt a crashed run left claimed or
// retryable be ended (digest.ClaimEnder): no run will claim it again, so
// it would stay claimed for ever. Enforce mode only; batched, sent with
// flushEnds.
func (p *pass) endClaim(id digest.Identity, reason string) {
	cfg := &p.runner.Config
	if p.number != 1 || cfg.Mode != ModeEnforce || cfg.EnforcePercent != nil && !digest.InCohort(id.Customer, *cfg.EnforcePercent) {
		return
	}
	if _, ok := p.runner.Ledger.(digest.ClaimEnder); !ok {
		return
	}
	p.ends = append(p.ends, digest.EndClaim{Keys: p.runner.pinnedKeys.Candidates(id), Week: cfg.Spec.Week, Reason: reason, RunID: cfg.RunID})
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
		return fmt.Errorf("end the claims of customers not sent to: %w", err)
	}
	for _, e := range ended {
		r.counters.endedClaims.Add(1)
		if e.To == digest.StateHeld {
			log.Warn("claim of a crashed run ended held: its send may have started; look it up (digest review)", "key", string(e.Key), "from", string(e.From))
			continue
		}
		log.Info("claim of a crashed run ended: not sent", "key", string(e.Key), "from", string(e.From), "to", string(e.To))
	}
	return nil
}
