package run_test

import (
	"context"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/run"
)

// slowMailer takes sendTime per send, in parallel (the provider's own
// lock would serialize the sleeps).
type slowMailer struct {
	*provider
	sendTime time.Duration
}

func (m slowMailer) Send(ctx context.Context, msg *digest.Message) (string, error) {
	time.Sleep(m.sendTime)
	return m.provider.Send(ctx, msg)
}

// With a slow mail server the senders account for every send's time as
// work, and the claim stage, ahead of them, is blocked on its output;
// each stage accounts for no more than its goroutines' lifetimes.
func TestStageTimesShowWhereTheRunWaits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 60)
	p := newProvider()
	const sendTime = 40 * time.Millisecond
	// Short batches keep the pipeline's queues short, so that the claim
	// stage fills them early and then waits for the senders.
	r := f.runner(p, p, func(c *run.Config) { c.Concurrency, c.BatchSize = 2, 3 })
	r.Mailer = slowMailer{provider: p, sendTime: sendTime}
	t0 := time.Now()
	sum := f.run(r)
	wall := time.Since(t0)
	if sum.Sent != f.want {
		t.Fatalf("sent %d, want %d", sum.Sent, f.want)
	}
	for _, name := range run.StageNames {
		if _, ok := sum.Stages[name]; !ok {
			t.Errorf("no times for stage %s: %v", name, sum.Stages)
		}
	}
	send, claim := sum.Stages["send"], sum.Stages["claim"]
	if least := time.Duration(sum.Sent) * sendTime; send.Busy < least {
		t.Errorf("senders busy %s, want at least %d sends × %s = %s", send.Busy, sum.Sent, sendTime, least)
	}
	// How long the claims take (SQLite, a loaded machine, -race) varies
	// too much for more: the senders never wait on the finisher for long,
	// and the claim stage, fed by a file, waits on the senders more than
	// on its input.
	if send.Busy < send.WaitOut {
		t.Errorf("senders busy %s, blocked on output %s: want them mostly busy", send.Busy, send.WaitOut)
	}
	if claim.WaitOut <= claim.WaitIn {
		t.Errorf("claim busy %s, waiting %s for input and %s on output: want it blocked on the senders more than waiting for input", claim.Busy, claim.WaitIn, claim.WaitOut)
	}
	// start has two markers, the rest one goroutine each.
	for name, n := range map[string]time.Duration{"read": 1, "claim": 1, "start": 2, "finish": 1, "renew": 1} {
		s := sum.Stages[name]
		if total := s.Busy + s.WaitIn + s.WaitOut; total > n*wall {
			t.Errorf("stage %s accounts for %s, more than %d goroutines × the run's %s", name, total, n, wall)
		}
	}
}
