package metrics

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/push"
)

// Job is the Pushgateway job label of every push.
const Job = "digest"

// Label is one grouping label of a push, in URL order.
type Label struct{ Name, Value string }

// Push sends the registry to the Pushgateway at url under job "digest" and
// the grouping labels. It adds rather than replaces (HTTP POST): metrics of
// the same name in the group are replaced, others are kept, so a failed
// run leaves the group's last success time alone. client may be nil.
func (r *Registry) Push(ctx context.Context, url string, client *http.Client, grouping ...Label) error {
	p := push.New(url, Job).Gatherer(r.reg)
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
