package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/weeklydigest/digest/run"
)

// finishedMetrics returns the "metrics" object of the "run finished"
// record in a run's JSON log.
func finishedMetrics(t *testing.T, log string) map[string]any {
	t.Helper()
	for line := range strings.Lines(log) {
		var rec struct {
			Msg     string         `json:"msg"`
			Metrics map[string]any `json:"metrics"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "run finished" {
			if rec.Metrics == nil {
				t.Fatalf("run finished without metrics: %s", line)
			}
			return rec.Metrics
		}
	}
	t.Fatalf("no run finished record in:\n%s", log)
	return nil
}

// jsonSeries is the value of a series in a metrics object: name, then
// label name and value for each label, in order.
func jsonSeries(m map[string]any, name string, labels ...string) (any, bool) {
	var at any = m
	for _, k := range append([]string{name}, labels...) {
		o, ok := at.(map[string]any)
		if !ok {
			return nil, false
		}
		if at, ok = o[k]; !ok {
			return nil, false
		}
	}
	return at, true
}

// The run's final record carries its metrics, with no Pushgateway set
// (what a CronJob without one reads from its log), and with one: the same
// values, series by series, as the push.
func TestRunFinishedRecordCarriesTheRunsMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env, stderr := metricsEnv(t, nil)
	if code := Main(ctx, []string{"run", "--snapshot", "../../examples/snapshot.jsonl", "--week", "2026-W48"}, env); code != ExitOK {
		t.Fatalf("run exit %d; stderr:\n%s", code, stderr)
	}
	m := finishedMetrics(t, stderr.String())
	for _, c := range []struct {
		path []string
		want float64
	}{
		{[]string{"digest_digests_total", "outcome", "sent"}, 20},
		{[]string{"digest_digests_total", "outcome", "suppressed"}, 1},
		{[]string{"digest_receipts", "state", "sent"}, 20},
		{[]string{"digest_run_exit_code"}, 0},
		{[]string{"digest_claim_latency_seconds_count"}, 20},
	} {
		if v, ok := jsonSeries(m, c.path[0], c.path[1:]...); !ok || v != c.want {
			t.Errorf("metrics %v = %v (present %v); want %v", c.path, v, ok, c.want)
		}
	}

	pg, srv := newPushgateway(t)
	env, stderr = metricsEnv(t, map[string]string{"DIGEST_PUSHGATEWAY_URL": srv.URL})
	if code := Main(ctx, []string{"run", "--snapshot", "../../examples/snapshot.jsonl", "--week", "2026-W48"}, env); code != ExitOK {
		t.Fatalf("run exit %d; stderr:\n%s", code, stderr)
	}
	m = finishedMetrics(t, stderr.String())
	pg.mu.Lock()
	group := pg.groups[week48]
	pg.mu.Unlock()
	if len(group) == 0 {
		t.Fatal("nothing pushed")
	}
	series := 0
	for name, mf := range group {
		for _, s := range mf.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				if l.GetName() == "job" || l.GetName() == "shard" || l.GetName() == "week" || l.GetName() == "mode" {
					continue // the push's grouping labels: the Pushgateway adds them
				}
				labels = append(labels, l.GetName(), l.GetValue())
			}
			want := map[string]float64{}
			switch {
			case s.Counter != nil:
				want[name] = s.GetCounter().GetValue()
			case s.Gauge != nil:
				want[name] = s.GetGauge().GetValue()
			case s.Histogram != nil:
				want[name+"_count"] = float64(s.GetHistogram().GetSampleCount())
				want[name+"_sum"] = s.GetHistogram().GetSampleSum()
				for _, b := range s.GetHistogram().GetBucket() {
					le := strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)
					if v, ok := jsonSeries(m, name+"_bucket", append(labels, "le", le)...); !ok || v != float64(b.GetCumulativeCount()) {
						t.Errorf("metrics %s_bucket{le=%s} = %v (present %v); the push has %v", name, le, v, ok, b.GetCumulativeCount())
					}
				}
			}
			for n, w := range want {
				series++
				if v, ok := jsonSeries(m, n, labels...); !ok || v != w {
					t.Errorf("metrics %s%v = %v (present %v); the push has %v", n, labels, v, ok, w)
				}
			}
		}
	}
	if series < 20 {
		t.Errorf("compared %d series; want every series of the push", series)
	}
}

// otlpSink is an OTLP/HTTP collector for tests: it decodes each metrics
// export (protobuf) and answers every other signal's with 200.
type otlpSink struct {
	mu      sync.Mutex
	exports []*colmetricpb.ExportMetricsServiceRequest
}

func (o *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path != "/v1/metrics" {
		return // spans: not this test's
	}
	var req colmetricpb.ExportMetricsServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	o.exports = append(o.exports, &req)
	o.mu.Unlock()
}

// value returns the value of the data point of name whose attributes
// include want, over every export; n counts the exports.
func (o *otlpSink) value(name string, want map[string]string) (v float64, found bool, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, req := range o.exports {
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if m.GetName() != name {
						continue
					}
					points := m.GetSum().GetDataPoints()
					points = append(points, m.GetGauge().GetDataPoints()...)
				next:
					for _, p := range points {
						got := map[string]string{}
						for _, kv := range p.GetAttributes() {
							got[kv.GetKey()] = kv.GetValue().GetStringValue()
						}
						for k, w := range want {
							if got[k] != w {
								continue next
							}
						}
						v, found = p.GetAsDouble(), true
					}
				}
			}
		}
	}
	return v, found, len(o.exports)
}

// With OpenTelemetry on and no Pushgateway, the run sends its final
// metrics over OTLP once, at its end: the push's series, its grouping
// labels as attributes. OTEL_METRICS_EXPORTER=none keeps them home; a
// collector that is down changes nothing but a warning.
func TestRunSendsItsMetricsOverOTLP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sink := &otlpSink{}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	env, stderr := metricsEnv(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL})
	if code := Main(ctx, []string{"run", "--snapshot", "../../examples/snapshot.jsonl", "--week", "2026-W48"}, env); code != ExitOK {
		t.Fatalf("run exit %d; stderr:\n%s", code, stderr)
	}
	sel := map[string]string{"outcome": "sent", "week": "2026-W48", "shard": "all", "mode": "enforce"}
	if v, ok, n := sink.value("digest_digests_total", sel); !ok || v != 20 || n != 1 {
		t.Errorf("digest_digests_total%v over OTLP = %v (present %v, %d exports); want 20 in one export", sel, v, ok, n)
	}
	if v, ok, _ := sink.value("digest_receipts", map[string]string{"state": "sent"}); !ok || v != 20 {
		t.Errorf("digest_receipts{state=sent} over OTLP = %v (present %v); want 20", v, ok)
	}

	off := &otlpSink{}
	offSrv := httptest.NewServer(off)
	defer offSrv.Close()
	env, stderr = metricsEnv(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": offSrv.URL, "OTEL_METRICS_EXPORTER": "none"})
	if code := Main(ctx, []string{"run", "--snapshot", "../../examples/snapshot.jsonl", "--week", "2026-W48"}, env); code != ExitOK {
		t.Fatalf("run exit %d; stderr:\n%s", code, stderr)
	}
	if _, _, n := off.value("digest_digests_total", nil); n != 0 {
		t.Errorf("OTEL_METRICS_EXPORTER=none: %d metrics exports; want none", n)
	}

	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	env, stderr = metricsEnv(t, map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": down.URL + "/v1/metrics"})
	if code := Main(ctx, []string{"run", "--snapshot", "../../examples/snapshot.jsonl", "--week", "2026-W48"}, env); code != ExitOK {
		t.Fatalf("run with the collector down: exit %d; want 0\n%s", code, stderr)
	}
	if !strings.Contains(stderr.String(), "metrics: not exported over OTLP") {
		t.Errorf("the collector down, yet no warning:\n%s", stderr)
	}
}

// "digest run --help" says where a run's metrics go without a
// Pushgateway, the variables that send them over OTLP, and the bound.
func TestRunHelpSaysWhereTheMetricsGo(t *testing.T) {
	t.Parallel()
	_, out, _ := runMain(t, nil, "run", "--help")
	for _, want := range []string{`"metrics" object`, "DIGEST_PUSHGATEWAY_URL", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_METRICS_EXPORTER=none",
		"/v1/metrics", "at most " + pushTimeout.String()} {
		if !strings.Contains(out, want) {
			t.Errorf("digest run --help does not say %q", want)
		}
	}
}

// Issue 35: the summary's repeat_* fields are named and explained in
// "digest run --help" and in docs/operations.md.
func TestRunHelpAndDocsExplainTheRepeats(t *testing.T) {
	t.Parallel()
	_, out, _ := runMain(t, nil, "run", "--help")
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range run.AgeBucketNames {
		field := "repeat_" + name
		if !strings.Contains(out, field+" (") {
			t.Errorf("digest run --help does not explain %s", field)
		}
		if !strings.Contains(string(doc), "| `"+field+"` |") {
			t.Errorf("docs/operations.md has no row explaining %s", field)
		}
	}
	if !strings.Contains(out, "five minutes") {
		t.Errorf("digest run --help does not say what under_5m means")
	}
}
