package run_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/run"
)

// A week whose receipts were pruned is refused before anything is claimed;
// an observe run only warns; ResendPrunedWeek sends the week again.
func TestRunRefusesAPrunedWeek(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 30)
	p := newProvider()
	if sum := f.run(f.runner(p, p, nil)); sum.Sent != f.want {
		t.Fatalf("first run: %+v", sum)
	}
	f.clock.Advance(200 * 24 * time.Hour)
	res, err := f.store.Prune(context.Background(), ledger.PruneRequest{Before: f.clock.Now().Add(-90 * 24 * time.Hour)})
	if err != nil || res.Receipts != int64(f.want) {
		t.Fatalf("prune: %+v %v", res, err)
	}

	sum, err := f.runner(p, p, nil).Run(context.Background())
	var pruned *run.PrunedWeekError
	if !errors.As(err, &pruned) || pruned.Tombstone.Pin.Week != runWeek || pruned.Tombstone.ReceiptsPruned != int64(f.want) {
		t.Fatalf("run of a pruned week: %v, want a PrunedWeekError for %s", err, runWeek)
	}
	if sum.Sent != 0 || sum.Digests != 0 || len(f.states()) != 0 {
		t.Fatalf("refused run claimed: %+v, receipts %v", sum, f.states())
	}
	observe := f.run(f.runner(nil, nil, func(c *run.Config) { c.Mode = run.ModeObserve }))
	if observe.Sent != 0 || len(f.states()) != 0 {
		t.Fatalf("observe run: %+v", observe)
	}
	if acc, dups := p.totals(); acc != f.want || dups != 0 {
		t.Fatalf("provider: %d accepted, %d duplicates before the resend", acc, dups)
	}

	again := f.run(f.runner(p, p, func(c *run.Config) { c.ResendPrunedWeek = true }))
	if again.Sent != f.want {
		t.Fatalf("resend of the pruned week: %+v, want %d sent", again, f.want)
	}
	if _, dups := p.totals(); dups != f.want {
		t.Fatalf("resend: %d duplicates at the provider, want %d (every pruned receipt's digest again)", dups, f.want)
	}
}
