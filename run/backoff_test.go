package run_test

import (
	"testing"
	"time"

	"github.com/weeklydigest/digest/run"
)

// Delay is equal jitter: for retry n it lies between half of
// min(Base·2^(n-1), Max) and all of it, never below the half.
func TestBackoffDelayIsEqualJitter(t *testing.T) {
	t.Parallel()
	b := run.Backoff{Base: 10 * time.Second, Max: 100 * time.Second}
	for _, tt := range []struct {
		n    int
		full time.Duration
	}{
		{1, 10 * time.Second},
		{2, 20 * time.Second},
		{4, 80 * time.Second},
		{5, 100 * time.Second}, // capped
		{30, 100 * time.Second},
	} {
		for range 200 {
			if d := b.Delay(tt.n); d < tt.full/2 || d > tt.full {
				t.Fatalf("Delay(%d) = %s, want between %s and %s", tt.n, d, tt.full/2, tt.full)
			}
		}
	}
	// The zero Backoff has the documented defaults: 30s, capped at 1h.
	var zero run.Backoff
	if d := zero.Delay(1); d < 15*time.Second || d > 30*time.Second {
		t.Errorf("zero Backoff Delay(1) = %s, want 15s to 30s", d)
	}
	if d := zero.Delay(20); d < 30*time.Minute || d > time.Hour {
		t.Errorf("zero Backoff Delay(20) = %s, want 30m to 1h", d)
	}
}

// RetryAt honours a provider's requested time only when it is later than
// the backoff.
func TestBackoffRetryAtTakesTheLaterOfBackoffAndRequest(t *testing.T) {
	t.Parallel()
	b := run.Backoff{Base: time.Minute, Max: time.Minute}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if at := b.RetryAt(now, 1, now.Add(time.Hour)); !at.Equal(now.Add(time.Hour)) {
		t.Errorf("requested an hour later: %s", at)
	}
	if at := b.RetryAt(now, 1, now.Add(time.Second)); at.Before(now.Add(30*time.Second)) || at.After(now.Add(time.Minute)) {
		t.Errorf("requested a second later: %s, want the backoff (30s to 1m)", at)
	}
}
