package run

import (
	"math"
	"sync"
	"time"
)

// The buckets of a LatencyHistogram are log-linear: each power of two of
// microseconds (an octave) is cut into latSub equal sub-buckets, for the
// latOctaves octaves from 1µs up to 2^27µs (about 134s). A duration under
// 1µs falls in the first bucket, one of 134s or more in the last. Memory is
// fixed whatever the number of samples. A quantile is reported as its
// bucket's upper bound (capped at the largest sample), so it overstates the
// true value by at most one sub-bucket, 12.5%; past the last bucket it
// reads as about 134s, however slow the claims were.
const (
	latSub     = 8  // sub-buckets per octave
	latOctaves = 27 // octaves 2^0 … 2^26 µs; the last starts at about 67s
)

// LatencyHistogram records durations in fixed memory and reports quantiles.
// It is safe for concurrent use.
type LatencyHistogram struct {
	mu     sync.Mutex
	counts [latOctaves * latSub]uint64
	n      uint64
	sum    time.Duration
	max    time.Duration
}

func latIndex(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us < 1 {
		return 0
	}
	exp := math.Floor(math.Log2(us))
	frac := us/math.Exp2(exp) - 1 // [0,1)
	i := int(exp)*latSub + int(frac*latSub)
	return min(i, latOctaves*latSub-1)
}

func latUpper(i int) time.Duration {
	exp, sub := i/latSub, i%latSub
	us := math.Exp2(float64(exp)) * (1 + float64(sub+1)/latSub)
	return time.Duration(us * float64(time.Microsecond))
}

// Observe records one duration, n times (a batch of n digests that waited
// d for their claim).
func (h *LatencyHistogram) Observe(d time.Duration, n int) {
	if n <= 0 {
		return
	}
	h.mu.Lock()
	h.counts[latIndex(d)] += uint64(n)
	h.n += uint64(n)
	h.sum += d * time.Duration(n)
	h.max = max(h.max, d)
	h.mu.Unlock()
}

// Quantile returns the q quantile (0 < q ≤ 1) as the upper bound of its
// bucket, or zero with no samples.
func (h *LatencyHistogram) Quantile(q float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(latUpper(i), h.max)
		}
	}
	return h.max
}

// Count returns the number of samples.
func (h *LatencyHistogram) Count() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// Cumulative returns, for each upper bound, how many samples were at most
// that bound (by bucket, so within the histogram's accuracy), with the
// total count and sum: the shape of a Prometheus histogram.
func (h *LatencyHistogram) Cumulative(bounds []time.Duration) (counts []uint64, n uint64, sum time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	counts = make([]uint64, len(bounds))
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		up := latUpper(i)
		for j, b := range bounds {
			if up <= b {
				counts[j] += c
			}
		}
	}
	return counts, h.n, h.sum
}
