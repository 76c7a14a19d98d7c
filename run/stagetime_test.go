package run_test

import (
	"context"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/run"
)

// slowMailer takes sendTime per send, in parallel (the provider's own
// lock would serialize the sleeps), once its gate is open (nil: open).
type slowMailer struct {
	*provider
	sendTime time.Duration
	gate     <-chan struct{}
}

func (m slowMailer) Send(ctx context.Context, msg *digest.Message) (string, error) {
	if m.gate != nil {
		<-m.gate
	}
	time.Sleep(m.sendTime)
	return m.provider.Send(ctx, msg)
}

// With the mail server holding every send, the pipeline fills and the
// claim stage, ahead of the senders, is blocked on its output for as long
// as the server holds them; then the senders account for every send's
// time as work; each stage accounts for no more than its goroutines'
// lifetimes. What is asserted is what load cannot move: a time the test
// holds the gate for, and the sends' own sleeps, never how a stage's CPU
// time compares with another's (at load 18 on two cores under -race the
// claims took longer than 40 ms sends, and the claim stage waited on its
// input more than on the senders).
func TestStageTimesShowWhereTheRunWaits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 200)
	p := newProvider()
	const (
		sendTime = 5 * time.Millisecond
		held     = 300 * time.Millisecond // the server holds every send this long once the pipeline is full
	)
	gate := make(chan struct{})
	// Short batches keep the pipeline's queues short, so that the claim
	// stage fills them and then waits for the senders.
	r := f.runner(p, p, func(c *run.Config) { c.Concurrency, c.BatchSize = 2, 3 })
	r.Mailer = slowMailer{provider: p, sendTime: sendTime, gate: gate}
	t0 := time.Now()
	type result struct {
		sum run.Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := r.Run(context.Background())
		done <- result{sum, err}
	}()
	// The claims stop growing once every queue ahead of the held senders
	// is full: the claim stage is then blocked on its output.
	claimed := func() int {
		rs, err := f.store.List(context.Background(), ledger.ListFilter{State: digest.StateClaimed, Limit: 1000})
		if err != nil {
			t.Error(err)
		}
		return len(rs)
	}
	most, same := 0, 0
	tick := time.NewTicker(10 * time.Millisecond)
	deadline := time.After(2 * time.Minute) // a hang, not a slow machine
	for same < 20 {
		select {
		case <-tick.C:
		case <-deadline:
			close(gate)
			t.Fatalf("the claims never stopped growing (%d claimed)", most)
		}
		if n := claimed(); n > most {
			most, same = n, 0
		} else if most > 0 {
			same++
		}
	}
	tick.Stop()
	if most >= f.want {
		close(gate)
		t.Fatalf("%d of %d digests claimed while the senders were held: want the pipeline to hold back", most, f.want)
	}
	time.Sleep(held) // the time measured: the claim stage blocked on its output
	close(gate)
	res := <-done
	wall := time.Since(t0)
	if res.err != nil {
		t.Fatal(res.err)
	}
	sum := res.sum
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
	if claim.WaitOut < held {
		t.Errorf("claim busy %s, waiting %s for input and %s on output: want at least the %s the senders were held blocked on output", claim.Busy, claim.WaitIn, claim.WaitOut, held)
	}
	// start has two markers, the rest one goroutine each.
	for name, n := range map[string]time.Duration{"read": 1, "claim": 1, "start": 2, "finish": 1, "renew": 1} {
		s := sum.Stages[name]
		if total := s.Busy + s.WaitIn + s.WaitOut; total > n*wall {
			t.Errorf("stage %s accounts for %s, more than %d goroutines × the run's %s", name, total, n, wall)
		}
	}
}
