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
var ServeRoutes = []string{"unsubscribe_page", "unsubscribe_post", "webhook", "healthz", "readyz", "metrics", "other"}

// UnsubscribeResults are the values of the result label of
// digest_unsubscribes_total: added (a new suppression), already (the
// customer was suppressed: still 200), invalid (a bad token, content type,
// body or form: 4xx, nothing recorded), rate_limited (429), error (the
// ledger failed: 503, nothing recorded).
var UnsubscribeResults = []string{"added", "already", "invalid", "rate_limited", "error"}

// WebhookProviders are the provider label values present at zero; a
// provider configured under another name adds its own.
var WebhookProviders = []string{"postmark", "ses", "sendgrid", "mailgun", "resend"}

// WebhookResults are the values of the result label of
// digest_webhook_requests_total: ok (every event recorded or ignored:
// 200), confirmed (a subscription handshake answered: 200),
// unknown_provider (404), too_large (413), bad_content_type (415),
// bad_signature (401), bad_payload (400), error (the ledger or the
// provider's confirmation failed: 503, the provider retries).
var WebhookResults = []string{"ok", "confirmed", "unknown_provider", "too_large", "bad_content_type", "bad_signature", "bad_payload", "error"}

// WebhookIgnored are the values of the reason label of
// digest_webhook_events_ignored_total: replay (stored before), other (a
// kind the job does not act on: opens, clicks, deferrals), unnamed (no
// digest key and no address).
var WebhookIgnored = []string{"replay", "other", "unnamed"}

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
	webhooks     *prometheus.CounterVec
	events       *prometheus.CounterVec
	ignored      *prometheus.CounterVec
	suppressions *prometheus.CounterVec
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
	s.webhooks = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "webhook_requests_total",
		Help: "Provider webhook requests by provider and result: ok, confirmed, unknown_provider, too_large, bad_content_type, bad_signature, bad_payload (4xx, nothing recorded), error (503: the provider retries)."},
		[]string{"provider", "result"})
	s.events = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "webhook_events_total",
		Help: "Provider events recorded in the ledger, by provider and kind."}, []string{"provider", "kind"})
	s.ignored = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "webhook_events_ignored_total",
		Help: "Provider events not recorded, by provider and reason: replay, other (a kind not acted on), unnamed (no key, no address)."},
		[]string{"provider", "reason"})
	s.suppressions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "webhook_suppressions_total",
		Help: "Addresses suppressed by provider events, by provider and reason: hard_bounce, complaint, unsubscribe, soft_bounce."},
		[]string{"provider", "reason"})
	s.reg.MustRegister(s.requests, s.duration, s.unsubscribes, s.webhooks, s.events, s.ignored, s.suppressions,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, r := range ServeRoutes {
		s.duration.WithLabelValues(r)
	}
	for _, r := range UnsubscribeResults {
		s.unsubscribes.WithLabelValues(r)
	}
	s.requests.WithLabelValues("unsubscribe_post", "200")
	for _, p := range WebhookProviders {
		s.WebhookProvider(p)
	}
	return s
}

// WebhookProvider puts provider's webhook series at zero, so that a rate
// over them is defined before its first request.
func (s *Serve) WebhookProvider(provider string) {
	for _, r := range WebhookResults {
		s.webhooks.WithLabelValues(provider, r)
	}
	for _, r := range WebhookIgnored {
		s.ignored.WithLabelValues(provider, r)
	}
	for _, k := range []string{"accepted", "delivered", "hard_bounce", "soft_bounce", "complaint", "unsubscribe"} {
		s.events.WithLabelValues(provider, k)
	}
	for _, r := range []string{"hard_bounce", "complaint", "unsubscribe", "soft_bounce"} {
		s.suppressions.WithLabelValues(provider, r)
	}
}

// ObserveWebhook counts one webhook request of provider by result.
func (s *Serve) ObserveWebhook(provider, result string) {
	s.webhooks.WithLabelValues(provider, result).Inc()
}

// ObserveEvent counts one recorded provider event.
func (s *Serve) ObserveEvent(provider, kind string) {
	s.events.WithLabelValues(provider, kind).Inc()
}

// ObserveIgnored counts one provider event not recorded, by reason.
func (s *Serve) ObserveIgnored(provider, reason string) {
	s.ignored.WithLabelValues(provider, reason).Inc()
}

// ObserveWebhookSuppression counts one address a provider event suppressed.
func (s *Serve) ObserveWebhookSuppression(provider, reason string) {
	s.suppressions.WithLabelValues(provider, reason).Inc()
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
