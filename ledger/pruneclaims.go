package ledger

import (
	"context"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// PruneEndReason is the reason a prune ends a claim with (EndStaleClaims).
const PruneEndReason = "claim ended by prune: no run finished it"

// PruneRunID is the run id of the history rows a prune's ended claims get.
const PruneRunID = "prune"

// StaleClaim is a receipt a prune ends: claimed with its lease expired by
// the ledger's clock, or retryable, last updated before the cutoff, of a
// week no run started since.
type StaleClaim struct {
	Key  digest.Key
	Week digest.ISOWeek
}

// staleClaimPage is how many stale claims EndStaleClaims lists and ends at a
// time.
const staleClaimPage = 1000

// StaleClaimEnder is what a store gives EndStaleClaims.
type StaleClaimEnder interface {
	// StaleClaims returns the stale claims of a prune with cutoff after
	// the key after, in key order, at most limit.
	StaleClaims(ctx context.Context, cutoff time.Time, after digest.Key, limit int) ([]StaleClaim, error)
	// EndStaleClaims is EndClaims for a prune with cutoff: in the same
	// transaction as the change, and with every StartWeek of the ledger
	// waiting for it, it skips each receipt of a week a run started since
	// the cutoff. So a run that starts after StaleClaims listed its week's
	// receipts (a backfill of an old week) keeps the ones it may retry.
	EndStaleClaims(ctx context.Context, cutoff time.Time, ends []digest.EndClaim) ([]digest.EndedClaim, error)
}

// EndStaleClaims ends, before a prune with cutoff deletes anything, the
// receipts no run will finish: a crashed run's claims (and retryable
// receipts) of weeks older than the cutoff, whose customer no run reads
// any more (suppressed, deleted from the source, out of the week; a
// sharded run cannot tell). Left alone they would stay claimed for ever,
// which prune never deletes. It lists them a page at a time
// (StaleClaims) and ends each page (EndStaleClaims), which checks each
// again: a live claim, or one of a week a run started since the listing,
// is never touched; the others end held when their send may have
// started, failed otherwise, with a history row. A dry run only counts
// the listed ones. It sets res.ClaimsEnded and res.ClaimsHeld.
func EndStaleClaims(ctx context.Context, dry bool, res *PruneResult, cutoff time.Time, s StaleClaimEnder) error {
	var after digest.Key
	for {
		page, err := s.StaleClaims(ctx, cutoff, after, staleClaimPage)
		if err != nil {
			return err
		}
		if dry {
			res.ClaimsEnded += int64(len(page))
		} else if len(page) > 0 {
			ended, err := s.EndStaleClaims(ctx, cutoff, PruneEnds(page))
			if err != nil {
				return err
			}
			for _, e := range ended {
				res.ClaimsEnded++
				if e.To == digest.StateHeld {
					res.ClaimsHeld++
				}
			}
		}
		if len(page) < staleClaimPage {
			return nil
		}
		after = page[len(page)-1].Key
	}
}

// PruneEnds are the ends of the stale claims page, with the prune's reason
// and run id.
func PruneEnds(page []StaleClaim) []digest.EndClaim {
	ends := make([]digest.EndClaim, len(page))
	for i, c := range page {
		ends[i] = digest.EndClaim{Keys: []digest.Key{c.Key}, Week: c.Week, Reason: PruneEndReason, RunID: PruneRunID}
	}
	return ends
}
