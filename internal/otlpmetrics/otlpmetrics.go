// Package otlpmetrics sends a run's final metrics to an OpenTelemetry
// collector over OTLP/HTTP: the registry a run pushes to a Pushgateway
// (package metrics), once, at the run's end, for a Job that has no
// Pushgateway to push to and no process left to be scraped.
//
// It is off unless the standard OpenTelemetry variables turn it on
// (Enabled), as tracing is (package tracing). On, the exporter's own
// environment handling applies: OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT,
// _COMPRESSION, _CERTIFICATE (and their _METRICS_ forms), and the
// resource's OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
//
// Each series keeps its Prometheus name, help and labels, and the
// grouping labels a push adds (shard, week, mode) become attributes of
// every data point; the job label of a push is the resource's
// service.name (digest), which a Prometheus that ingests OTLP turns into
// job. Counters are cumulative sums starting at the run's start: each run
// counts from zero, as a restarted process does, which is what the start
// time tells a backend. Gauges are at the run's end.
package otlpmetrics

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"

	"github.com/weeklydigest/digest/internal/otlpenv"
	"github.com/weeklydigest/digest/internal/redact"
)

// Scope is the instrumentation scope of every metric sent: the package
// that defines them.
const Scope = "github.com/weeklydigest/digest/internal/metrics"

// Enabled reports whether the standard variables ask for metrics: an OTLP
// endpoint is set (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, or
// OTEL_EXPORTER_OTLP_ENDPOINT, the one that turns traces on too),
// OTEL_SDK_DISABLED is not "true" and OTEL_METRICS_EXPORTER is not "none"
// (otlpenv.Enabled).
func Enabled(getenv func(string) string) bool { return otlpenv.Enabled(getenv, "metrics") }

// Run is what one export says of a finished run.
type Run struct {
	// Gatherer is the run's registry: what its push carries.
	Gatherer prometheus.Gatherer
	// Attributes are added to every data point: a push's grouping labels.
	Attributes []attribute.KeyValue
	// Start and End bound the run: the counters' start, the gauges' time.
	Start, End time.Time
	// Version is the resource's service.version.
	Version string
}

// Send exports the run's metrics in one OTLP/HTTP request to the endpoint
// the variables name, retrying what the exporter deems retryable until
// ctx is done. getenv names the endpoint; the exporter reads its other
// variables from the process's environment.
func Send(ctx context.Context, getenv func(string) string, r Run) error {
	endpoint, err := metricsURL(getenv)
	if err != nil {
		return err
	}
	res, err := otlpenv.Resource(ctx, r.Version)
	if err != nil {
		return err
	}
	mfs, err := r.Gatherer.Gather()
	if err != nil {
		return fmt.Errorf("gather: %w", err)
	}
	rm, err := ResourceMetrics(mfs, res, r.Attributes, r.Start, r.End)
	if err != nil {
		return err
	}
	exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(endpoint))
	if err != nil {
		return fmt.Errorf("OTLP exporter: %w", err)
	}
	err = exp.Export(ctx, rm)
	if serr := exp.Shutdown(ctx); err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("export to %s: %w", otlpenv.Redact(endpoint), redact.Error(err, endpoint))
	}
	return nil
}

// metricsURL is where metrics go: OTEL_EXPORTER_OTLP_METRICS_ENDPOINT as
// it is, or OTEL_EXPORTER_OTLP_ENDPOINT with /v1/metrics appended.
func metricsURL(getenv func(string) string) (string, error) { return otlpenv.URL(getenv, "metrics") }
