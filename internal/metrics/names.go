package metrics

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Names returns the name of every series the job exports (a run's push or
// "digest schedule", "digest prune"'s push and "digest verify"'s), histogram
// series with their _bucket, _sum and _count suffixes, sorted; "digest
// schedule"'s own (digest_schedule_*) included. Alerts, dashboards and
// the runbook are checked against it. The go_* and process_* metrics of
// "digest schedule" are not in it.
func Names() []string {
	r := New()
	r.ObserveRun(Run{ExitCode: 0, Finished: time.Now()}) // exports the last success time
	r.WithSchedule()                                     // "digest schedule"'s own
	prune := pruneRegistry(0, time.Now())
	verify := verifyRegistry(Verification{Finished: time.Now()})
	var out []string
	for _, g := range []prometheus.Gatherer{r.reg, prune, verify} {
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
