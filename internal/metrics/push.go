package metrics

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
)

// Job is the Pushgateway job label of every push.
const Job = "digest"

// Label is one grouping label of a push.
type Label struct{ Name, Value string }

// Push sends the registry to the Pushgateway at url under job "digest" and
// the grouping labels (a run uses shard, week and mode). It adds rather
// than replaces (HTTP POST): metrics of the same name in the group are
// replaced, others are kept, so a failed run leaves the group's last
// success time alone. client may be nil.
func (r *Registry) Push(ctx context.Context, url string, client *http.Client, grouping ...Label) error {
	return pushGatherer(ctx, url, client, r.reg, grouping)
}

// PushPrune sends the outcome of one "digest prune" to the Pushgateway at
// url, in a group of its own (job "digest", command "prune") so that it
// never touches a run's group: digest_receipts_pruned_total (the receipts
// this prune deleted) and digest_last_prune_timestamp_seconds (at).
// client may be nil.
func PushPrune(ctx context.Context, url string, client *http.Client, pruned int64, at time.Time) error {
	return pushGatherer(ctx, url, client, pruneRegistry(pruned, at), []Label{{"command", "prune"}})
}

// pruneRegistry holds what one "digest prune" pushes.
func pruneRegistry(pruned int64, at time.Time) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	n := prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "receipts_pruned_total",
		Help: "Receipts (with their history) deleted by the last \"digest prune\"."})
	last := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "last_prune_timestamp_seconds",
		Help: "Unix time the last \"digest prune\" finished."})
	reg.MustRegister(n, last)
	n.Add(float64(pruned))
	last.Set(unix(at))
	return reg
}

func pushGatherer(ctx context.Context, url string, client *http.Client, g prometheus.Gatherer, grouping []Label) error {
	p := push.New(url, Job).Gatherer(g)
	if client != nil {
		p = p.Client(client)
	}
	for _, l := range grouping {
		p = p.Grouping(l.Name, l.Value)
	}
	if err := p.AddContext(ctx); err != nil {
		return fmt.Errorf("push metrics to %s: %w", url, err)
	}
	return nil
}
