package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ServeRoutes are the values of the route label of "digest serve"'s
// request metrics.
var ServeRoutes = []string{"unsubscribe_page", "unsubscribe_post", "healthz", "readyz", "metrics", "other"}

// UnsubscribeResults are the values of the result label of
// digest_unsubscribes_total: added (a new suppression), already (the
// customer was suppressed: still 200), invalid (a bad token, content type,
// body or form: 4xx, nothing recorded), rate_limited (429), error (the
// ledger failed: 503, nothing recorded).
var UnsubscribeResults = []string{"added", "already", "invalid", "rate_limited", "error"}

// ServeLatencyBounds are the upper bounds of the request duration
// histogram's buckets.
var ServeLatencyBounds = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Serve holds the metrics of "digest serve", in a registry of its own
// with the Go runtime's and the process's. Safe for concurrent use.
type Serve struct {
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	unsubscribes *prometheus.CounterVec
}

// NewServe returns the registry of "digest serve", every label value
// present at zero.
func NewServe() *Serve {
	s := &Serve{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "http_requests_total",
			Help: "Requests \"digest serve\" answered, by route and status code."}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "http_request_duration_seconds",
			Help: "Time \"digest serve\" took to answer a request, by route.", Buckets: ServeLatencyBounds}, []string{"route"}),
		unsubscribes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "unsubscribes_total",
			Help: "One-click unsubscribe POSTs by result: added, already (suppressed before: 200 again), invalid (4xx), rate_limited (429), error (ledger failed: 503)."}, []string{"result"}),
	}
	s.reg.MustRegister(s.requests, s.duration, s.unsubscribes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, r := range ServeRoutes {
		s.duration.WithLabelValues(r)
	}
	for _, r := range UnsubscribeResults {
		s.unsubscribes.WithLabelValues(r)
	}
	s.requests.WithLabelValues("unsubscribe_post", "200")
	return s
}

// Gatherer returns the registry, for a test.
func (s *Serve) Gatherer() prometheus.Gatherer { return s.reg }

// Handler serves the registry in the Prometheus exposition formats.
func (s *Serve) Handler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg})
}

// ObserveRequest counts one answered request of route.
func (s *Serve) ObserveRequest(route string, code int, took time.Duration) {
	s.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	s.duration.WithLabelValues(route).Observe(took.Seconds())
}

// ObserveUnsubscribe counts one unsubscribe POST by result.
func (s *Serve) ObserveUnsubscribe(result string) {
	s.unsubscribes.WithLabelValues(result).Inc()
}
