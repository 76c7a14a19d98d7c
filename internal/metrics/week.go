package metrics

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"

	"github.com/weeklydigest/digest/internal/redact"
)

// WeekJob is the Pushgateway job of the week-state groups, one group per
// week (grouping label week="YYYY-Www"), apart from the runs' groups.
const WeekJob = "digest_week"

// WeekMetricNames are the names of what PushWeekState pushes.
var WeekMetricNames = []string{"digest_week_end_timestamp_seconds", "digest_week_complete", "digest_week_needs_review",
	"digest_week_customers", "digest_week_status_timestamp_seconds"}

// WeekState is what "digest status" knows of one week, as the week-state
// metric pushes it. The alert rules read exactly these names.
type WeekState struct {
	Week string    // YYYY-Www: the grouping label
	End  time.Time // the week's end in its zone
	// Complete is true only when status's verdict is complete.
	Complete bool
	// NeedsReview counts the receipts waiting for a decision (held,
	// quarantined).
	NeedsReview int64
	// Customers counts the week's customers by outcome (package
	// weekstatus). Nil when the command could not count them: the
	// digest_week_customers series are then left out, not pushed as 0.
	Customers map[string]int64
	At        time.Time // when the state was computed
}

// PushWeekState replaces the week's group (HTTP PUT) at the Pushgateway at
// url, job "digest_week", with s: digest_week_end_timestamp_seconds,
// digest_week_complete, digest_week_needs_review,
// digest_week_customers{outcome} and digest_week_status_timestamp_seconds.
// Replacing, not adding: the group is the week's latest state, so an
// alert on a past week resolves as soon as a command finds it complete.
// client may be nil.
func PushWeekState(ctx context.Context, url string, client *http.Client, s WeekState) error {
	return replaceWeekGroup(ctx, url, client, WeekJob, s.Week, weekRegistry(s))
}

// replaceWeekGroup replaces (HTTP PUT) the group job, week="week" at the
// Pushgateway at url with what g gathers: the week's latest state and
// nothing else, whatever an earlier push held. client may be nil.
func replaceWeekGroup(ctx context.Context, url string, client *http.Client, job, week string, g prometheus.Gatherer) error {
	p := push.New(url, job).Gatherer(g).Grouping("week", week)
	if client != nil {
		p = p.Client(client)
	}
	if err := p.PushContext(ctx); err != nil {
		return fmt.Errorf("push %s metrics of %s to %s: %w", job, week, redact.URL(url), redact.Error(err, url))
	}
	return nil
}

// setGauge registers in reg a gauge of that name (in Namespace) set to v.
func setGauge(reg *prometheus.Registry, name, help string, v float64) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help})
	g.Set(v)
	reg.MustRegister(g)
}

func weekRegistry(s WeekState) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	gauge := func(name, help string, v float64) { setGauge(reg, name, help, v) }
	complete := 0.0
	if s.Complete {
		complete = 1
	}
	gauge("week_end_timestamp_seconds", "Unix time the week ends, in its zone (DIGEST_TZ).", unix(s.End))
	gauge("week_complete", "1 when \"digest status\" says the week is complete: every customer's outcome decided, nothing to review.", complete)
	gauge("week_needs_review", "Receipts of the week that need an operator's decision (held, quarantined).", float64(s.NeedsReview))
	gauge("week_status_timestamp_seconds", "Unix time this week state was computed.", unix(s.At))
	if s.Customers != nil {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "week_customers",
			Help: "The week's customers by outcome (sent, suppressed, skipped_*, observed_not_sent, pending, claimed_retryable, held, quarantined, failed, ...)."},
			[]string{"outcome"})
		for o, n := range s.Customers {
			v.WithLabelValues(o).Set(float64(n))
		}
		reg.MustRegister(v)
	}
	return reg
}
