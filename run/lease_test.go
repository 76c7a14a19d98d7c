package run_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/snapshot"
)

// syncBuffer is a log sink safe for the runner's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A run stalls in its first send past the lease (the provider moves the
// clock two minutes) while another run takes that claim over. The run
// says it lost the claim after sending it, and sends none of the claims
// whose leases ran out meanwhile: they are given back unsent.
func TestStalledSendReportsTheTakeoverTruthfully(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 12)
	spec := digest.Spec{Week: runWeek, Location: time.UTC, Type: "weekly_activity", Version: "v1"}
	other := map[digest.Key]digest.ClaimRequest{}
	for r := range snapshot.Synthetic(12, runWeek, 1) {
		d, err := digest.Build(r, spec)
		if err != nil {
			t.Fatal(err)
		}
		other[f.kr.Key(d.Identity)] = digest.ClaimRequest{Keys: f.kr.Candidates(d.Identity), Fingerprint: d.Fingerprint(),
			Week: runWeek, RunID: "other", Lease: time.Minute}
	}
	p := newProvider()
	stalled := false
	p.script = func(key digest.Key, _ int) (bool, error) {
		if !stalled {
			stalled = true
			f.clock.Advance(2 * time.Minute)
			res, err := f.store.Claim(context.Background(), []digest.ClaimRequest{other[key]})
			if err != nil || res[0].Outcome != digest.OutcomeClaimed {
				t.Errorf("the other run's takeover: %v %+v", err, res)
			}
		}
		return true, nil
	}
	var logs syncBuffer
	sum := f.run(f.runner(p, p, func(c *run.Config) {
		c.Concurrency, c.BatchSize = 1, 100
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	}))
	if len(p.sends) != 1 {
		t.Fatalf("%d digests sent; want only the one in flight when the leases ran out", len(p.sends))
	}
	if sum.LostClaims != 1 || sum.LostAfterSend != 1 || sum.Sent != 0 || sum.Pending != f.want-1 {
		t.Fatalf("summary %+v; want 1 claim lost after its send and %d given back", sum, f.want-1)
	}
	if !strings.Contains(logs.String(), "after this one sent it") || strings.Contains(logs.String(), "not sent by this one") {
		t.Fatalf("the log does not say the lost claim was sent:\n%s", logs.String())
	}
}
