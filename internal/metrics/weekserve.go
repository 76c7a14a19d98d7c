package metrics

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// servedWeeks is how many weeks "digest schedule" keeps serving the state
// of: the newest by week end. A weekly schedule retries only the due week,
// so a few past ones are enough for the alerts to see a week complete.
const servedWeeks = 8

// weekStates serves the week-state series (WeekMetricNames) of the weeks
// "digest schedule" ran, labelled by week, as PushWeekState pushes them
// to the Pushgateway in groups labelled by week. Without it a schedule
// that serves its metrics instead of pushing would have no
// digest_week_complete at all, and DigestNoRecentWeekComplete would page
// for ever.
type weekStates struct {
	mu    sync.Mutex
	weeks map[string]WeekState
	descs map[string]*prometheus.Desc
}

func newWeekStates() *weekStates {
	ws := &weekStates{weeks: map[string]WeekState{}, descs: map[string]*prometheus.Desc{}}
	for _, d := range []struct{ name, help string }{
		{"week_end_timestamp_seconds", "Unix time the week ends, in its zone (DIGEST_TZ)."},
		{"week_complete", "1 when \"digest status\" says the week is complete: every customer's outcome decided, nothing to review."},
		{"week_needs_review", "Receipts of the week that need an operator's decision (held, quarantined)."},
		{"week_status_timestamp_seconds", "Unix time this week state was computed."},
	} {
		ws.descs[d.name] = prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", d.name), d.help, []string{"week"}, nil)
	}
	ws.descs["week_customers"] = prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "week_customers"),
		"The week's customers by outcome (sent, suppressed, skipped_*, observed_not_sent, pending, claimed_retryable, held, quarantined, failed, ...).",
		[]string{"week", "outcome"}, nil)
	return ws
}

func (ws *weekStates) set(s WeekState) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.weeks[s.Week] = s
	if len(ws.weeks) <= servedWeeks {
		return
	}
	oldest := ""
	for w, st := range ws.weeks {
		if oldest == "" || st.End.Before(ws.weeks[oldest].End) {
			oldest = w
		}
	}
	delete(ws.weeks, oldest)
}

func (ws *weekStates) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range ws.descs {
		ch <- d
	}
}

func (ws *weekStates) Collect(ch chan<- prometheus.Metric) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	weeks := make([]string, 0, len(ws.weeks))
	for w := range ws.weeks {
		weeks = append(weeks, w)
	}
	slices.Sort(weeks)
	for _, w := range weeks {
		s := ws.weeks[w]
		complete := 0.0
		if s.Complete {
			complete = 1
		}
		for name, v := range map[string]float64{
			"week_end_timestamp_seconds":    unix(s.End),
			"week_complete":                 complete,
			"week_needs_review":             float64(s.NeedsReview),
			"week_status_timestamp_seconds": unix(s.At),
		} {
			ch <- prometheus.MustNewConstMetric(ws.descs[name], prometheus.GaugeValue, v, w)
		}
		for o, n := range s.Customers {
			ch <- prometheus.MustNewConstMetric(ws.descs["week_customers"], prometheus.GaugeValue, float64(n), w, o)
		}
	}
}

// ObserveWeekState serves s as the week's state among r's metrics, with a
// week label, replacing what r served for that week: what "digest
// schedule" does where a run would push (PushWeekState). r serves the
// newest eight weeks.
func (r *Registry) ObserveWeekState(s WeekState) {
	r.weekOnce.Do(func() {
		r.weeks = newWeekStates()
		r.reg.MustRegister(r.weeks)
	})
	r.weeks.set(s)
}
