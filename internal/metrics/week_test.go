package metrics_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/weeklydigest/digest/internal/metrics"
)

// The week state replaces the week's group (PUT) under job digest_week,
// with exactly the names the alert rules read.
func TestPushWeekStateReplacesTheWeeksGroup(t *testing.T) {
	t.Parallel()
	type push struct {
		method, path string
		families     map[string]*dto.MetricFamily
	}
	var (
		mu     sync.Mutex
		pushes []push
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := push{method: r.Method, path: r.URL.EscapedPath(), families: map[string]*dto.MetricFamily{}}
		dec := expfmt.NewDecoder(r.Body, expfmt.ResponseFormat(r.Header))
		for {
			mf := &dto.MetricFamily{}
			if err := dec.Decode(mf); err == io.EOF {
				break
			} else if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			p.families[mf.GetName()] = mf
		}
		mu.Lock()
		pushes = append(pushes, p)
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)

	end := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	at := end.Add(6 * time.Hour)
	s := metrics.WeekState{Week: "2026-W49", End: end, Complete: false, NeedsReview: 2, At: at,
		Customers: map[string]int64{"sent": 85, "observed_not_sent": 798, "pending": 0}}
	if err := metrics.PushWeekState(context.Background(), srv.URL, nil, s); err != nil {
		t.Fatal(err)
	}
	s.Customers = nil
	s.Complete = true
	if err := metrics.PushWeekState(context.Background(), srv.URL, nil, s); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pushes) != 2 {
		t.Fatalf("%d pushes, want 2", len(pushes))
	}
	p := pushes[0]
	if p.method != http.MethodPut || p.path != "/metrics/job/digest_week/week/2026-W49" {
		t.Fatalf("push %s %s, want PUT /metrics/job/digest_week/week/2026-W49", p.method, p.path)
	}
	gauge := func(p push, name string) float64 {
		t.Helper()
		mf, ok := p.families[name]
		if !ok || len(mf.Metric) != 1 {
			t.Fatalf("%s: %v, want one sample", name, mf)
		}
		return mf.Metric[0].GetGauge().GetValue()
	}
	if got := gauge(p, "digest_week_end_timestamp_seconds"); got != float64(end.Unix()) {
		t.Errorf("end = %v, want %d", got, end.Unix())
	}
	if got := gauge(p, "digest_week_complete"); got != 0 {
		t.Errorf("complete = %v, want 0", got)
	}
	if got := gauge(p, "digest_week_needs_review"); got != 2 {
		t.Errorf("needs_review = %v, want 2", got)
	}
	if got := gauge(p, "digest_week_status_timestamp_seconds"); got != float64(at.Unix()) {
		t.Errorf("status timestamp = %v, want %d", got, at.Unix())
	}
	byOutcome := map[string]float64{}
	for _, m := range p.families["digest_week_customers"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "outcome" {
				byOutcome[l.GetValue()] = m.GetGauge().GetValue()
			}
		}
	}
	if len(byOutcome) != 3 || byOutcome["sent"] != 85 || byOutcome["observed_not_sent"] != 798 || byOutcome["pending"] != 0 {
		t.Errorf("customers by outcome = %v", byOutcome)
	}
	for _, n := range metrics.WeekMetricNames {
		if p.families[n] == nil {
			t.Errorf("WeekMetricNames names %s, which the push lacks", n)
		}
	}
	if len(p.families) != len(metrics.WeekMetricNames) {
		t.Errorf("pushed %d families, WeekMetricNames lists %d", len(p.families), len(metrics.WeekMetricNames))
	}
	if q := pushes[1]; q.method != http.MethodPut || gauge(q, "digest_week_complete") != 1 || q.families["digest_week_customers"] != nil {
		t.Errorf("second push %s: complete %v, customers %v; want PUT, 1, none", q.method, gauge(q, "digest_week_complete"), q.families["digest_week_customers"])
	}
}
