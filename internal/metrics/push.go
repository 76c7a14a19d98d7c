package metrics

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"

	"github.com/weeklydigest/digest/internal/redact"
	"github.com/weeklydigest/digest/ledger"
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

// Prune is what one "digest prune" tells the metrics.
type Prune struct {
	// Receipts counts the receipts it deleted.
	Receipts int64
	// Oldest is the oldest row of each kept table after it
	// (ledger.Retention); nil when they could not be read.
	Oldest []ledger.OldestRow
	// At is when it finished.
	At time.Time
}

// PushPrune sends the outcome of one "digest prune" to the Pushgateway at
// url, in a group of its own (job "digest", command "prune") so that it
// never touches a run's group: digest_receipts_pruned_total (the receipts
// this prune deleted), digest_last_prune_timestamp_seconds (p.At) and
// digest_ledger_oldest_row_timestamp_seconds{table} (p.Oldest). client
// may be nil.
func PushPrune(ctx context.Context, url string, client *http.Client, p Prune) error {
	return pushGatherer(ctx, url, client, pruneRegistry(p), []Label{{"command", "prune"}})
}

// pruneRegistry holds what one "digest prune" pushes.
func pruneRegistry(p Prune) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	n := prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "receipts_pruned_total",
		Help: "Receipts (with their history) deleted by the last \"digest prune\"."})
	last := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "last_prune_timestamp_seconds",
		Help: "Unix time the last \"digest prune\" finished."})
	reg.MustRegister(n, last)
	n.Add(float64(p.Receipts))
	last.Set(unix(p.At))
	if p.Oldest != nil {
		oldest := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "ledger_oldest_row_timestamp_seconds",
			Help: "Unix time of the oldest row of each table \"digest prune\" keeps for a horizon, as the last prune left it, by the time its horizon compares (receipts: the start of their oldest ISO week); 0 when the table is empty. Rows kept as evidence may be older than the horizon."},
			[]string{"table"})
		for _, r := range p.Oldest {
			v := 0.0
			if !r.At.IsZero() {
				v = unix(r.At)
			}
			oldest.WithLabelValues(string(r.Table)).Set(v)
		}
		reg.MustRegister(oldest)
	}
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
		return fmt.Errorf("push metrics to %s: %w", redact.URL(url), redact.Error(err, url))
	}
	return nil
}
