package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/weeklydigest/digest/internal/metrics"
	"github.com/weeklydigest/digest/internal/otlpmetrics"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/run"
)

// pushTimeout bounds what the end of a run spends on metrics (reading the
// week's counts, pushing). It is part of what a pod needs after SIGTERM:
// the CronJob's terminationGracePeriodSeconds covers --grace plus this.
const pushTimeout = 10 * time.Second

// scheduleMetricsKey is the context key under which "digest schedule" hands
// its registry to the runs it starts: they record into it instead of
// pushing.
type scheduleMetricsKey struct{}

func withScheduleMetrics(ctx context.Context, reg *metrics.Registry) context.Context {
	return context.WithValue(ctx, scheduleMetricsKey{}, reg)
}

// runMetrics are a finished run's final metrics: the registry its push
// to the Pushgateway carries, the "metrics" object of its "run finished"
// record (LogValue), and, with OpenTelemetry on, its OTLP metrics.
type runMetrics struct {
	reg      *metrics.Registry
	run      metrics.Run
	grouping []metrics.Label // the push's grouping labels
	// deadline bounds reading the week's counts and publishing together
	// (pushTimeout): after SIGTERM, the pod's grace period covers it.
	deadline  time.Time
	scheduled bool // "digest schedule" started the run: it serves the metrics
}

// observeRun records a finished run (normal end, deadline or SIGTERM)
// with the ledger's counts of its week in a registry of its own, and in
// the schedule's registry when "digest schedule" started it. A failure to
// read the counts is logged and leaves their gauges out of the run's.
func observeRun(ctx context.Context, env *Env, log *slog.Logger, store ledger.Store, r *run.Runner, cfg *run.Config, sum run.Summary, runErr error) *runMetrics {
	m := &runMetrics{reg: metrics.New(), deadline: env.now().Add(pushTimeout),
		grouping: []metrics.Label{{Name: "shard", Value: cfg.Shard.String()}, {Name: "week", Value: cfg.Spec.Week.String()}, {Name: "mode", Value: string(cfg.Mode)}}}
	// After SIGTERM ctx is done, but the counts and the push still go out.
	ctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), m.deadline)
	defer cancel()
	run := metrics.Run{Summary: sum, Latency: r.ClaimLatency(), ExitCode: codeOf(runErr), Finished: env.now()}
	if c, err := store.Counts(ctx, cfg.Spec.Week); err != nil {
		log.Warn("metrics: cannot read the week's counts", "week", cfg.Spec.Week.String(), "err", err)
	} else {
		run.Counts = &c
	}
	m.reg.ObserveRun(run)
	m.run = run
	if reg, ok := ctx.Value(scheduleMetricsKey{}).(*metrics.Registry); ok {
		m.scheduled = true
		reg.ObserveRun(run)
	}
	return m
}

// LogValue is the run's metrics as the "run finished" record's metrics
// object: every series of the push by name (metrics.Values).
func (m *runMetrics) LogValue() slog.Value {
	v, err := m.reg.Values()
	if err != nil {
		return slog.StringValue("unavailable: " + err.Error())
	}
	return slog.AnyValue(v)
}

// publish pushes the run's metrics to DIGEST_PUSHGATEWAY_URL when set (a
// run of "digest schedule" never pushes: the schedule serves them), and
// sends them over OTLP/HTTP when the standard OpenTelemetry variables ask
// for metrics (otlpmetrics.Enabled), within the same pushTimeout. A
// metrics failure is logged and never changes the run's exit code.
func (m *runMetrics) publish(ctx context.Context, env *Env, url string, log *slog.Logger) {
	ctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), m.deadline)
	defer cancel()
	if !m.scheduled && url != "" {
		if err := m.reg.Push(ctx, url, nil, m.grouping...); err != nil {
			log.Error("metrics: push failed", "err", err)
		}
	}
	if !otlpmetrics.Enabled(env.Getenv) {
		return
	}
	attrs := make([]attribute.KeyValue, 0, len(m.grouping))
	for _, l := range m.grouping {
		attrs = append(attrs, attribute.String(l.Name, l.Value))
	}
	r := otlpmetrics.Run{Gatherer: m.reg.Gatherer(), Attributes: attrs, Start: m.run.Finished.Add(-m.run.Summary.Duration), End: m.run.Finished, Version: currentBuild().Version}
	if err := otlpmetrics.Send(ctx, env.Getenv, r); err != nil {
		log.Warn("metrics: not exported over OTLP; the run's result stands", "err", err)
	}
}

// recordPrune pushes a prune's count, and the oldest row of each table it
// keeps for a horizon as it left them, to DIGEST_PUSHGATEWAY_URL when set.
// Oldest rows it cannot read are left out of the push, which goes on.
func recordPrune(ctx context.Context, env *Env, url string, log *slog.Logger, store ledger.Store, res ledger.PruneResult) {
	if url == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pushTimeout)
	defer cancel()
	p := metrics.Prune{Receipts: res.Receipts, At: env.now()}
	oldest, err := store.OldestRows(ctx)
	if err != nil {
		log.Warn("metrics: cannot read the oldest rows", "err", err)
	}
	p.Oldest = oldest
	if err := metrics.PushPrune(ctx, url, nil, p); err != nil {
		log.Error("metrics: push failed", "err", err)
	}
}

// codeOf is the exit code Main returns for a command's error.
func codeOf(err error) int {
	var ue *usageError
	var ee *exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue):
		return ExitUsage
	case errors.As(err, &ee):
		return ee.code
	}
	return ExitFailure
}

// metricsMux serves the registry on /metrics and health on /healthz: 200
// "ok", or 503 with the reason while health says a week is behind (nil
// health: always ok).
func metricsMux(reg *metrics.Registry, health *scheduleHealth) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", reg.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if reason := health.behind(); reason != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, reason)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// serveMetrics listens on addr (DIGEST_METRICS_ADDR) and serves reg and
// health until ctx is done; the returned stop shuts the server down and
// waits for it.
func serveMetrics(ctx context.Context, addr string, reg *metrics.Registry, health *scheduleHealth, log *slog.Logger) (net.Addr, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, usagef("DIGEST_METRICS_ADDR=%q: %v", addr, err)
	}
	srv := &http.Server{Handler: metricsMux(reg, health), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("serving /metrics and /healthz", "addr", ln.Addr().String())
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}
	return ln.Addr(), stop, nil
}

// newScheduleRegistry is the registry "digest schedule" serves: its runs'
// metrics (each run's counts replace the last's, as a push does), its own
// (digest_schedule_*), and the Go runtime's and the process's, which a
// long-lived process should show.
func newScheduleRegistry() *metrics.Registry { return metrics.New().WithRuntime() }

// startScheduleMetrics serves a new registry and health on
// DIGEST_METRICS_ADDR and returns a context that makes the runs started
// with it record there, and the schedule's own metrics.
func startScheduleMetrics(ctx context.Context, addr string, health *scheduleHealth, log *slog.Logger) (context.Context, *metrics.Schedule, func(), error) {
	reg := newScheduleRegistry()
	sm := reg.WithSchedule()
	_, stop, err := serveMetrics(ctx, addr, reg, health, log)
	if err != nil {
		return nil, nil, nil, err
	}
	return withScheduleMetrics(ctx, reg), sm, stop, nil
}
