package metrics

import (
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/weeklydigest/digest/ledger"
)

// Names returns the name of every series the job exports (a run's push or
// "digest schedule", "digest prune"'s push and "digest verify"'s), histogram
// series with their _bucket, _sum and _count suffixes, sorted; "digest
// schedule"'s own (digest_schedule_*) included. Alerts, dashboards and
// the runbook are checked against it. The go_* and process_* metrics of
// "digest schedule" and "digest serve" are not in it.
func Names() []string {
	r := New()
	r.ObserveRun(Run{ExitCode: 0, Finished: time.Now()}) // exports the last success time
	r.WithSchedule()                                     // "digest schedule"'s own
	prune := pruneRegistry(Prune{At: time.Now(), Oldest: []ledger.OldestRow{{Table: ledger.TableReceipts}}})
	verify := verifyRegistry(Verification{Finished: time.Now()})
	var out []string
	for _, g := range []prometheus.Gatherer{r.reg, prune, verify, serveOnly()} {
		mfs, err := g.Gather()
		if err != nil {
			panic(err) // the registries are this package's own: a bug
		}
		for _, mf := range mfs {
			out = append(out, mf.GetName())
			if mf.GetType().String() == "HISTOGRAM" {
				out = append(out, mf.GetName()+"_bucket", mf.GetName()+"_sum", mf.GetName()+"_count")
			}
		}
	}
	slices.Sort(out)
	return out
}

// serveOnly is "digest serve"'s registry without the runtime's metrics.
func serveOnly() prometheus.Gatherer {
	s := NewServe()
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := s.reg.Gather()
		out := mfs[:0]
		for _, mf := range mfs {
			if strings.HasPrefix(mf.GetName(), Namespace+"_") {
				out = append(out, mf)
			}
		}
		return out, err
	})
}
