package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// lastRun is a counter (or a vector of counters over one label) holding
// the last run's counts: a run counts from zero, as a restarted process
// does, so its value means the same pushed by a Job and served by
// "digest schedule". Every label value is exported, at zero until set.
type lastRun struct {
	desc   *prometheus.Desc
	values []string // label values; nil: one unlabelled counter

	mu     sync.Mutex
	counts []int
}

func newLastRun(name, help, label string, values []string) *lastRun {
	var labels []string
	if label != "" {
		labels = []string{label}
	}
	n := max(len(values), 1)
	return &lastRun{desc: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil), values: values, counts: make([]int, n)}
}

// set replaces the counts, one per label value in order.
func (c *lastRun) set(counts ...int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.counts)
	copy(c.counts, counts)
}

// Describe implements prometheus.Collector.
func (c *lastRun) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *lastRun) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.values == nil {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.counts[0]))
		return
	}
	for i, v := range c.values {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.counts[i]), v)
	}
}
