package run_test

import (
	"testing"
	"time"

	"github.com/weeklydigest/digest/run"
)

// A quantile is its bucket's upper bound: never below the true value, at
// most 12.5% above it, and never above the largest sample.
func TestLatencyQuantileOverstatesByAtMostOneSubBucket(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{
		3 * time.Microsecond, 900 * time.Microsecond, 4 * time.Millisecond,
		37 * time.Millisecond, 1500 * time.Millisecond, 60 * time.Second,
	} {
		var h run.LatencyHistogram
		h.Observe(d, 9)
		h.Observe(2*d, 1) // the largest sample, which caps only the top quantile
		got := h.Quantile(0.5)
		if got < d || float64(got) > 1.125*float64(d) {
			t.Errorf("p50 of %s = %s, want %s to %s", d, got, d, time.Duration(1.125*float64(d)))
		}
		if top := h.Quantile(1); top != 2*d {
			t.Errorf("p100 of samples up to %s = %s, want the largest sample", 2*d, top)
		}
	}
	// Past the last bucket (about 134s) a quantile reads as that bound.
	var slow run.LatencyHistogram
	slow.Observe(10*time.Minute, 1)
	if q := slow.Quantile(0.5); q < 134*time.Second || q > 135*time.Second {
		t.Errorf("p50 of one 10m sample = %s, want the last bucket's bound (about 134s)", q)
	}
	var empty run.LatencyHistogram
	if q := empty.Quantile(0.99); q != 0 || empty.Count() != 0 {
		t.Errorf("empty histogram: p99 %s, count %d", q, empty.Count())
	}
}
