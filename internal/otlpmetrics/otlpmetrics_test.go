package otlpmetrics

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/weeklydigest/digest/internal/metrics"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/run"
)

// The standard variables that send metrics where.
const (
	envEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envMetricsEndpoint = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
)

// receiver is an OTLP/HTTP metrics receiver: it decodes every export
// request's protobuf body and keeps it.
type receiver struct {
	t    *testing.T
	mu   sync.Mutex
	reqs []*colmetricpb.ExportMetricsServiceRequest
	path string
}

func newReceiver(t *testing.T) (*receiver, *httptest.Server) {
	rc := &receiver{t: t}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	return rc, srv
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a protobuf POST", http.StatusBadRequest)
		return
	}
	var req colmetricpb.ExportMetricsServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, &req)
	rc.path = r.URL.Path
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{})
	w.Write(b)
}

// metric returns the named metric of the only request, and its resource's
// attributes.
func (rc *receiver) metric(t *testing.T, name string) (*metricpb.Metric, map[string]string) {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.reqs) != 1 || len(rc.reqs[0].ResourceMetrics) != 1 || len(rc.reqs[0].ResourceMetrics[0].ScopeMetrics) != 1 {
		t.Fatalf("%d requests; want one, of one resource and one scope", len(rc.reqs))
	}
	rm := rc.reqs[0].ResourceMetrics[0]
	res := attrs(rm.GetResource().GetAttributes())
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.GetName() == name {
			return m, res
		}
	}
	t.Fatalf("no metric %s", name)
	return nil, nil
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		out[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	return out
}

// The run's registry arrives as one OTLP request at <endpoint>/v1/metrics:
// every family of the push under its Prometheus name, counters as
// monotonic cumulative sums from the run's start with the push's grouping
// labels as attributes, gauges at its end, the histogram's buckets
// per bucket; the resource names the service and its version.
func TestSendReachesAnOTLPReceiver(t *testing.T) {
	t.Parallel()
	rc, srv := newReceiver(t)
	reg := metrics.New()
	var lat run.LatencyHistogram
	lat.Observe(3*time.Millisecond, 10)
	lat.Observe(40*time.Millisecond, 2)
	start := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	end := start.Add(90 * time.Second)
	reg.ObserveRun(metrics.Run{Summary: run.Summary{Sent: 20, Suppressed: 1, Duration: end.Sub(start)}, Latency: &lat,
		Counts: &ledger.Counts{}, ExitCode: 0, Finished: end})
	env := map[string]string{envEndpoint: srv.URL + "/"}
	grouping := []attribute.KeyValue{attribute.String("shard", "all"), attribute.String("week", "2026-W48"), attribute.String("mode", "enforce")}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Send(ctx, func(k string) string { return env[k] }, Run{Gatherer: reg.Gatherer(), Attributes: grouping, Start: start, End: end, Version: "v0.1.0"}); err != nil {
		t.Fatal(err)
	}
	if rc.path != "/v1/metrics" {
		t.Errorf("exported to %s; want /v1/metrics", rc.path)
	}

	m, res := rc.metric(t, "digest_digests_total")
	if res["service.name"] != "digest" || res["service.version"] != "v0.1.0" {
		t.Errorf("resource %v; want service.name digest, service.version v0.1.0", res)
	}
	sum := m.GetSum()
	if sum == nil || !sum.IsMonotonic || sum.AggregationTemporality != metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
		t.Fatalf("digest_digests_total %v; want a monotonic cumulative sum", m)
	}
	sent := false
	for _, p := range sum.DataPoints {
		a := attrs(p.Attributes)
		if a["week"] != "2026-W48" || a["shard"] != "all" || a["mode"] != "enforce" {
			t.Errorf("data point attributes %v; want the push's grouping labels", a)
		}
		if p.StartTimeUnixNano != uint64(start.UnixNano()) || p.TimeUnixNano != uint64(end.UnixNano()) {
			t.Errorf("data point from %d to %d; want the run's %d to %d", p.StartTimeUnixNano, p.TimeUnixNano, start.UnixNano(), end.UnixNano())
		}
		if a["outcome"] == "sent" {
			sent = true
			if p.GetAsDouble() != 20 {
				t.Errorf("digest_digests_total{outcome=sent} = %v; want 20", p.GetAsDouble())
			}
		}
	}
	if !sent {
		t.Error("no digest_digests_total{outcome=sent}")
	}
	if m, _ := rc.metric(t, "digest_run_duration_seconds"); m.GetGauge() == nil || m.GetGauge().DataPoints[0].GetAsDouble() != 90 {
		t.Errorf("digest_run_duration_seconds %v; want a gauge of 90", m)
	}
	h, _ := rc.metric(t, "digest_claim_latency_seconds")
	hp := h.GetHistogram().GetDataPoints()
	if len(hp) != 1 || hp[0].GetCount() != 12 || len(hp[0].BucketCounts) != len(hp[0].ExplicitBounds)+1 || len(hp[0].ExplicitBounds) != len(metrics.ClaimLatencyBounds) {
		t.Fatalf("digest_claim_latency_seconds %v; want 12 samples in the %d bounds' buckets", h, len(metrics.ClaimLatencyBounds))
	}
	var n uint64
	for i, c := range hp[0].BucketCounts {
		n += c
		if b := hp[0].ExplicitBounds; i < len(b) && b[i] == 0.005 && c != 10 {
			t.Errorf("bucket (0.0025, 0.005]: %d; want 10", c)
		}
	}
	if n != 12 {
		t.Errorf("bucket counts add up to %d; want 12", n)
	}
	mfs, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	got := len(rc.reqs[0].ResourceMetrics[0].ScopeMetrics[0].Metrics)
	rc.mu.Unlock()
	if got != len(mfs) {
		t.Errorf("%d metrics exported; want the push's %d families", got, len(mfs))
	}
}

// A collector that refuses the export is an error, within ctx's time.
func TestSendReportsARefusal(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusBadRequest) // not retryable
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	env := map[string]string{envMetricsEndpoint: srv.URL + "/v1/metrics"}
	err := Send(ctx, func(k string) string { return env[k] }, Run{Gatherer: metrics.New().Gatherer(), End: time.Now()})
	if err == nil || !strings.Contains(err.Error(), "export to "+srv.URL) {
		t.Errorf("Send to a refusing collector: %v; want an error naming it", err)
	}
}

// A summary has no counterpart here: refused, not sent half converted.
func TestResourceMetricsRefusesASummary(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	s := prometheus.NewSummary(prometheus.SummaryOpts{Name: "s", Help: "h"})
	s.Observe(1)
	reg.MustRegister(s)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ResourceMetrics(mfs, nil, nil, time.Time{}, time.Now()); err == nil || !strings.Contains(err.Error(), "SUMMARY") {
		t.Errorf("ResourceMetrics of a summary: %v; want it refused", err)
	}
}
