package run

import (
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// The "send started" chunk is half a second of the limiter's rate, never
// below 1 nor above the chunk sized by batch and concurrency; the claims
// taken ahead are a quarter lease's worth of sends, at most a batch.
func TestChunksFollowTheRate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		rate        float64
		lease       time.Duration
		chunk, take int
	}{
		{rate: 0, lease: 45 * time.Second, chunk: 25, take: 100}, // unlimited: today's sizes
		{rate: 0.5, lease: 3 * time.Second, chunk: 1, take: 1},
		{rate: 1, lease: 45 * time.Second, chunk: 1, take: 11},
		{rate: 5, lease: 45 * time.Second, chunk: 2, take: 56},
		{rate: 50, lease: 45 * time.Second, chunk: 25, take: 100},
		{rate: 500, lease: 45 * time.Second, chunk: 25, take: 100},
		{rate: 5, lease: 3 * time.Second, chunk: 2, take: 3},
	}
	for _, c := range cases {
		cfg := Config{Rate: c.rate, Lease: c.lease, BatchSize: 100, Concurrency: 4}
		if got := startChunk(&cfg); got != c.chunk {
			t.Errorf("rate %v: start chunk %d, want %d", c.rate, got, c.chunk)
		}
		if got := claimBatch(&cfg); got != c.take {
			t.Errorf("rate %v, lease %s: claim batch %d, want %d", c.rate, c.lease, got, c.take)
		}
	}
}

// A lease is refused when it cannot hold a send's worst case twice over,
// or when it is longer than a day.
func TestLeaseValidation(t *testing.T) {
	t.Parallel()
	spec := digest.Spec{Week: digest.ISOWeek{Year: 2026, Week: 40}, Type: "weekly_activity", Version: "v1"}
	cases := []struct {
		lease, worst time.Duration
		ok           bool
	}{
		{lease: DefaultLease, worst: 16 * time.Second, ok: true}, // the defaults: 8s SMTP timeout
		{lease: 31 * time.Second, worst: 16 * time.Second, ok: false},
		{lease: 2 * time.Second, worst: time.Second, ok: true},
		{lease: 24 * time.Hour, ok: true},
		{lease: 24*time.Hour + time.Second, ok: false},
		{lease: 500 * time.Millisecond, ok: false},
	}
	for _, c := range cases {
		cfg := Config{Spec: spec, Lease: c.lease, SendWorstCase: c.worst}
		if err := cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("lease %s, worst case %s: %v, want ok=%v", c.lease, c.worst, err, c.ok)
		}
	}
}
