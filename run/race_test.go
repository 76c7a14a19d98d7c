package run_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/run"
)

// gatedMailer holds every send until open is closed, telling started of
// the first one: a run that has claimed and not yet finished.
type gatedMailer struct {
	*provider
	open    chan struct{}
	started chan struct{}
	once    sync.Once
}

func (m *gatedMailer) Send(ctx context.Context, msg *digest.Message) (string, error) {
	m.once.Do(func() { close(m.started) })
	select {
	case <-m.open:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	return m.provider.Send(ctx, msg)
}

// Two runs race on one ledger: the one that meets the other's claims
// (busy) waits for them to be settled and says so. Every digest each run
// read is in a part of its summary (Unaccounted 0), the keys the other
// run sent among them as settled_by_others, not missing from the count.
func TestRacingRunsAccountForEveryDigest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 60)
	p := newProvider()
	gate := &gatedMailer{provider: p, open: make(chan struct{}), started: make(chan struct{})}
	deadline := f.clock.Now().Add(time.Hour)
	first := f.runner(p, p, func(c *run.Config) { c.RunID, c.Deadline = "first", deadline })
	first.Mailer = gate
	type result struct {
		sum run.Summary
		err error
	}
	firstDone := make(chan result, 1)
	go func() {
		sum, err := first.Run(context.Background())
		firstDone <- result{sum, err}
	}()
	<-gate.started // the first run holds claims it has not finished
	var openOnce sync.Once
	var a result
	loser := f.runner(p, p, func(c *run.Config) {
		c.RunID, c.Deadline = "second", deadline
		c.Sleep = func(ctx context.Context, d time.Duration) error {
			// Waiting for the busy keys: let the first run finish them.
			openOnce.Do(func() {
				close(gate.open)
				a = <-firstDone
			})
			return f.clock.Sleep(ctx, d)
		}
	})
	b := f.run(loser)
	openOnce.Do(func() { close(gate.open); a = <-firstDone }) // never slept: fail below, not hang
	if a.err != nil {
		t.Fatalf("first run: %v", a.err)
	}
	for name, s := range map[string]run.Summary{"first": a.sum, "second": b} {
		if s.Digests != 60 || s.Unaccounted() != 0 || !s.Complete() {
			t.Errorf("%s run: %d digests, %d accounted for (%+v); want all 60 and complete", name, s.Digests, s.Accounted(), s)
		}
	}
	if b.SettledByOthers == 0 {
		t.Errorf("second run: %+v; want the keys the first run held and sent counted as settled_by_others", b)
	}
	if got := a.sum.Sent + b.Sent; got != f.want {
		t.Errorf("sent %d + %d, want %d in all", a.sum.Sent, b.Sent, f.want)
	}
	if acc, dups := p.totals(); acc != f.want || dups != 0 {
		t.Errorf("provider accepted %d keys with %d duplicates, want %d and 0", acc, dups, f.want)
	}
}
