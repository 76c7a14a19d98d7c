package run

import (
	"context"
	"fmt"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// PrunedWeekError refuses a run of a week whose receipts were pruned.
// Nothing was claimed or sent.
type PrunedWeekError struct {
	Tombstone digest.PruneTombstone
}

func (e *PrunedWeekError) Error() string {
	t := e.Tombstone
	return fmt.Sprintf("week %s was pruned: %d receipts deleted by digest prune (first %s, last %s); "+
		"a run would send those digests again, so nothing was claimed",
		t.Pin.Week, t.ReceiptsPruned, t.FirstPrunedAt.UTC().Format(time.RFC3339), t.LastPrunedAt.UTC().Format(time.RFC3339))
}

// checkPruned records that a run of the week starts and refuses a pruned
// week unless the configuration allows a resend. It runs before anything
// is claimed. The ledger records the start and reads the tombstone in one
// step that a concurrent prune cannot split (see Ledger.StartWeek).
func (r *Runner) checkPruned(ctx context.Context, pin digest.SnapshotPin) error {
	cfg := &r.Config
	stone, err := r.Ledger.StartWeek(ctx, pin, cfg.Now())
	r.counters.ledgerCalls.Add(1)
	if err != nil {
		return fmt.Errorf("start week: %w", err)
	}
	switch {
	case stone == nil:
		return nil
	case cfg.Mode == ModeObserve:
		cfg.Logger.WarnContext(ctx, "this week was pruned: an enforce run would refuse it", "week", pin.Week.String(),
			"receipts_pruned", stone.ReceiptsPruned, "last_pruned_at", stone.LastPrunedAt)
		return nil
	case cfg.ResendPrunedWeek:
		cfg.Logger.WarnContext(ctx, "sending a pruned week again: digests whose receipts were pruned go out a second time",
			"week", pin.Week.String(), "receipts_pruned", stone.ReceiptsPruned, "last_pruned_at", stone.LastPrunedAt)
		return nil
	}
	return &PrunedWeekError{Tombstone: *stone}
}
