package ledger

import (
	"context"

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

// EndStaleClaims ends, before a prune deletes anything, the receipts no run
// will finish: a crashed run's claims (and retryable receipts) of weeks
// older than the cutoff, whose customer no run reads any more (suppressed,
// deleted from the source, out of the week; a sharded run cannot tell).
// Left alone they would stay claimed for ever, which prune never deletes.
// list returns the stale claims after a key, in key order, at most limit;
// end is the store's EndClaims, which checks each again (a live claim is
// never touched) and ends it held when its send may have started, failed
// otherwise, with a history row. A dry run only counts the listed ones.
// It sets res.ClaimsEnded and res.ClaimsHeld.
func EndStaleClaims(ctx context.Context, dry bool, res *PruneResult,
	list func(ctx context.Context, after digest.Key, limit int) ([]StaleClaim, error),
	end func(ctx context.Context, ends []digest.EndClaim) ([]digest.EndedClaim, error),
) error {
	var after digest.Key
	for {
		page, err := list(ctx, after, staleClaimPage)
		if err != nil {
			return err
		}
		if dry {
			res.ClaimsEnded += int64(len(page))
		} else if len(page) > 0 {
			ends := make([]digest.EndClaim, len(page))
			for i, c := range page {
				ends[i] = digest.EndClaim{Keys: []digest.Key{c.Key}, Week: c.Week, Reason: PruneEndReason, RunID: PruneRunID}
			}
			ended, err := end(ctx, ends)
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
