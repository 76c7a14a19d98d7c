package metrics

import "github.com/prometheus/client_golang/prometheus"

// Schedule holds what "digest schedule" adds to the registry it serves:
// whether the due week is behind (its run exited 1 or 3 and the schedule
// is retrying it), and how many retries it has made. Unlike a run's
// counters, the retries counter counts from the process's start.
type Schedule struct {
	behind  prometheus.Gauge
	retries prometheus.Counter
}

// WithSchedule registers the schedule's metrics in r and returns them.
func (r *Registry) WithSchedule() *Schedule {
	s := &Schedule{
		behind: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "schedule_behind",
			Help: "1 while \"digest schedule\" retries a week whose run exited 1 or 3 (incomplete), 0 otherwise; /healthz answers 503 meanwhile."}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "schedule_retries_total",
			Help: "Runs \"digest schedule\" started to retry an incomplete week, since the process started."}),
	}
	r.reg.MustRegister(s.behind, s.retries)
	return s
}

// SetBehind records whether the due week is behind.
func (s *Schedule) SetBehind(behind bool) {
	v := 0.0
	if behind {
		v = 1
	}
	s.behind.Set(v)
}

// Retried counts one retry run.
func (s *Schedule) Retried() { s.retries.Inc() }
