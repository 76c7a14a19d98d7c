package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// histogram is a Prometheus histogram fed with already bucketed counts
// (run.LatencyHistogram.Cumulative) of the last run. The run loop keeps
// its own fixed-memory histogram, so this one only converts; it never sees
// single samples.
type histogram struct {
	desc   *prometheus.Desc
	bounds []time.Duration

	mu     sync.Mutex
	counts []uint64 // cumulative, one per bound
	n      uint64
	sum    time.Duration
}

func newHistogram(name, help string, bounds []time.Duration) *histogram {
	return &histogram{
		desc:   prometheus.NewDesc(name, help, nil, nil),
		bounds: bounds,
		counts: make([]uint64, len(bounds)),
	}
}

// set replaces the counts with one run's cumulative counts, total count
// and sum.
func (h *histogram) set(counts []uint64, n uint64, sum time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	copy(h.counts, counts)
	h.n = n
	h.sum = sum
}

// Describe implements prometheus.Collector.
func (h *histogram) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

// Collect implements prometheus.Collector.
func (h *histogram) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	buckets := make(map[float64]uint64, len(h.bounds))
	for i, b := range h.bounds {
		buckets[b.Seconds()] = h.counts[i]
	}
	n, sum := h.n, h.sum
	h.mu.Unlock()
	ch <- prometheus.MustNewConstHistogram(h.desc, n, sum.Seconds(), buckets)
}
