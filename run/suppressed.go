package run

import (
	"context"
	"fmt"

	"github.com/weeklydigest/digest/digest"
)

// unsuppressed returns batch without the items whose customer or address
// is on the ledger's suppression list, counting those as suppressed (on
// the first pass, or a retry pass of pending customers), like a customer the source marks unsubscribed: no
// claim, so no receipt blocks a later week once the suppression is
// removed. One look-up covers the whole batch: the keys of every
// customer and address under every secret of the keyring, so a
// suppression recorded before a key rotation still holds.
func (p *pass) unsuppressed(ctx context.Context, batch []*item) ([]*item, error) {
	if len(batch) == 0 {
		return batch, nil
	}
	kr := p.runner.Keyring
	keys := make([]digest.SuppressionKey, 0, 2*len(batch)*len(kr.IDs()))
	for _, it := range batch {
		keys = append(keys, kr.CustomerKeys(it.digest.Customer.ID)...)
		keys = append(keys, kr.AddressKeys(it.digest.Customer.Email)...)
	}
	p.runner.counters.ledgerCalls.Add(1)
	found, err := p.runner.Ledger.Suppressed(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("look up suppressions: %w", err)
	}
	if len(found) == 0 {
		return batch, nil
	}
	kept := batch[:0]
	for _, it := range batch {
		if suppressedAny(found, kr.CustomerKeys(it.digest.Customer.ID)) || suppressedAny(found, kr.AddressKeys(it.digest.Customer.Email)) {
			if p.number == 1 || p.pendingOnly {
				// Suppressed while pending: no longer pending, so
				// counted here.
				p.runner.counters.suppressed.Add(1)
			}
			if p.runner.Listed != nil {
				p.runner.Listed(it.digest.Customer.ID)
			}
			p.endClaim(it.digest.Identity, reasonSuppressed)
			continue
		}
		kept = append(kept, it)
	}
	return kept, nil
}

func suppressedAny(found map[digest.SuppressionKey]bool, keys []digest.SuppressionKey) bool {
	for _, k := range keys {
		if found[k] {
			return true
		}
	}
	return false
}
