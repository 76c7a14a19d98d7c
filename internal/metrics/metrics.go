// Package metrics turns what a digest run did into Prometheus metrics, in a
// registry of its own (never the process-wide default one), and pushes them
// to a Pushgateway.
//
// A run that ends (normally, at its deadline or after SIGTERM) records its
// run.Summary, its claim latency histogram and the ledger's counts of the
// week; a Kubernetes Job then pushes them, and "digest schedule" serves them
// on /metrics. Either way the counters (…_total, the histogram) are those of
// the last run: each run counts from zero, as a process that restarts does,
// so an alert or a rate() reads the same under a CronJob and under
// "digest schedule". Times are Unix timestamps, never ages: an age is stale
// the moment it is pushed, a timestamp lets an alert compute time() - t.
package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/run"
)

// Namespace prefixes every metric name.
const Namespace = "digest"

// Outcomes are the values of the outcome label of digest_digests_total, in
// the order of run.Summary's counters.
var Outcomes = []string{"sent", "duplicate", "reconciled", "quarantined", "held", "retryable", "failed", "skipped", "invalid", "suppressed"}

// LookupResults are the values of the result label of digest_lookups_total.
var LookupResults = []string{"found", "not_found", "error"}

// ClaimLatencyBounds are the upper bounds of the claim latency histogram's
// buckets: a claim is one ledger round trip for a batch of keys.
var ClaimLatencyBounds = []time.Duration{
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// Run is what one finished run tells the metrics.
type Run struct {
	Summary run.Summary
	// Latency is the run's claim latency histogram (Runner.ClaimLatency);
	// nil records no samples.
	Latency *run.LatencyHistogram
	// Counts are the ledger's counts of the run's week at its end; nil when
	// they could not be read (the backlog gauges keep their last value).
	Counts *ledger.Counts
	// ExitCode is the run's exit code; only 0 sets the last success time.
	ExitCode int
	// Finished is when the run ended.
	Finished time.Time
}

// Registry holds the job's metrics in its own prometheus.Registry. Its
// methods are safe for concurrent use.
type Registry struct {
	reg *prometheus.Registry

	weekOnce sync.Once
	weeks    *weekStates // "digest schedule"'s week states, once one is observed

	digests      *lastRun
	ledgerCalls  *lastRun
	lookups      *lastRun
	duplicateAge *lastRun
	retries      *lastRun
	throttled    *lastRun
	claimLatency *histogram

	receipts        *prometheus.GaugeVec
	oldestRetryable prometheus.Gauge // Unix time; 0 if none
	oldestClaimed   prometheus.Gauge // Unix time; 0 if none
	pending         prometheus.Gauge
	duration        prometheus.Gauge
	exitCode        prometheus.Gauge
	lastRun         prometheus.Gauge
	// lastSuccess has no labels; as a vector it is exported only once set,
	// so a failed run's push (an add, not a replace) leaves the time of the
	// last successful run in the Pushgateway as it was.
	lastSuccess *prometheus.GaugeVec
}

// New returns a Registry with every metric registered, and every outcome,
// result and age label present at zero.
func New() *Registry {
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help})
	}
	r := &Registry{
		reg: prometheus.NewRegistry(),
		digests: newLastRun("digests_total", "Digests of the last run by outcome: sent, duplicate (sent before, not sent again), reconciled (found at the provider), quarantined, held, retryable (rows left retryable at the end of the run, to finish later), failed, skipped, invalid, suppressed (unsubscribed).",
			"outcome", Outcomes),
		ledgerCalls: newLastRun("ledger_calls_total", "Ledger round trips of the last run (claims, finishes, look-ups of receipts).", "", nil),
		lookups: newLastRun("lookups_total", "Provider look-ups of maybe-sent digests in the last run by result: found (reconciled), not_found (sent), error (left retryable).",
			"result", LookupResults),
		duplicateAge: newLastRun("duplicate_hits_total", "Digests of the last run already sent, by time since the send: under_5m, same_day, later, beyond_horizon.",
			"age", run.AgeBucketNames[:]),
		retries: newLastRun("temporary_retries_total", "Temporary send failures (4xx, 429, network) of the last run recorded as retryable; a digest retried twice counts twice.", "", nil),
		throttled: newLastRun("throttled_total", "Sends and look-ups of the last run the provider refused for everyone (SMTP 421, HTTP 429): provider-wide throttling. Per-recipient 4xx replies (greylisting) are not counted.",
			"", nil),
		claimLatency: newHistogram(prometheus.BuildFQName(Namespace, "", "claim_latency_seconds"), "Latency of the ledger claim round trip in the last run, one sample per digest of the batch.", ClaimLatencyBounds),
		receipts: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "receipts",
			Help: "Receipts of the run's week by state at the end of the run; held and quarantined wait for an operator."}, []string{"state"}),
		oldestRetryable: gauge("oldest_retryable_timestamp_seconds", "Unix time the week's oldest retryable receipt was last tried, at the end of the run; 0 if none. Alert on time() minus it."),
		oldestClaimed:   gauge("oldest_claimed_timestamp_seconds", "Unix time of the last attempt of the week's oldest claimed receipt, at the end of the run; 0 if none."),
		pending:         gauge("pending", "Digests the run left unsettled (retryable, not due, or interrupted)."),
		duration:        gauge("run_duration_seconds", "Wall time of the last run."),
		exitCode:        gauge("run_exit_code", "Exit code of the last run: 0 ok, 1 failure, 2 usage, 3 incomplete, 4 needs review."),
		lastRun:         gauge("last_run_timestamp_seconds", "Unix time the last run ended."),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "last_success_timestamp_seconds",
			Help: "Unix time the last run that exited 0 ended."}, nil),
	}
	r.reg.MustRegister(r.digests, r.ledgerCalls, r.lookups, r.duplicateAge, r.retries, r.throttled, r.claimLatency,
		r.receipts, r.oldestRetryable, r.oldestClaimed, r.pending, r.duration, r.exitCode, r.lastRun, r.lastSuccess)
	for _, s := range receiptStates {
		r.receipts.WithLabelValues(string(s))
	}
	return r
}

// WithRuntime adds the Go runtime's and the process's metrics (go_*,
// process_*): for "digest schedule", a long-lived process. A run's push
// leaves them out: they would describe a process that has ended.
func (r *Registry) WithRuntime() *Registry {
	r.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

var receiptStates = []digest.State{digest.StateClaimed, digest.StateSent, digest.StateRetryable, digest.StateFailed, digest.StateHeld, digest.StateQuarantined, digest.StateAcknowledged}

// Gatherer returns the registry, for a push or a test.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Handler serves the registry in the Prometheus exposition formats.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg})
}

// ObserveRun sets the counters to a finished run's counts (each run counts
// from zero) and sets the gauges.
func (r *Registry) ObserveRun(last Run) {
	s := last.Summary
	r.digests.set(s.Sent, s.Duplicates, s.Reconciled, s.Quarantined, s.Held, s.Retryable, s.Failed, s.Skipped, s.Invalid, s.Suppressed)
	r.lookups.set(s.LookupsFound, s.LookupsNotFound, s.LookupErrors)
	r.duplicateAge.set(s.DuplicateAges[:]...)
	r.ledgerCalls.set(s.LedgerCalls)
	r.retries.set(s.Retries)
	r.throttled.set(s.Throttled)
	lat := last.Latency
	if lat == nil {
		lat = &run.LatencyHistogram{}
	}
	r.claimLatency.set(lat.Cumulative(ClaimLatencyBounds))
	if c := last.Counts; c != nil {
		for _, st := range receiptStates {
			r.receipts.WithLabelValues(string(st)).Set(float64(c.ByState[st]))
		}
		r.oldestRetryable.Set(since(last.Finished, c.OldestRetryable))
		r.oldestClaimed.Set(since(last.Finished, c.OldestClaimed))
	}
	r.pending.Set(float64(s.Pending))
	r.duration.Set(s.Duration.Seconds())
	r.exitCode.Set(float64(last.ExitCode))
	r.lastRun.Set(unix(last.Finished))
	if last.ExitCode == 0 {
		r.lastSuccess.WithLabelValues().Set(unix(last.Finished))
	}
}

// since is the Unix time age before end, or 0 when age is 0 (none).
func since(end time.Time, age time.Duration) float64 {
	if age <= 0 {
		return 0
	}
	return unix(end.Add(-age))
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
