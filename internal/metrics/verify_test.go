package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// PushVerify replaces (PUT) the group job="digest_verify", week=W with the
// three gauges of the verification.
func TestPushVerify(t *testing.T) {
	t.Parallel()
	type push struct {
		method, path string
		values       map[string]float64
	}
	var mu sync.Mutex
	var pushes []push
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := push{method: r.Method, path: r.URL.Path, values: map[string]float64{}}
		dec := expfmt.NewDecoder(r.Body, expfmt.ResponseFormat(r.Header))
		for {
			mf := &dto.MetricFamily{}
			if err := dec.Decode(mf); err == io.EOF {
				break
			} else if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if mf.GetType() != dto.MetricType_GAUGE || len(mf.GetMetric()) != 1 {
				http.Error(w, "want one gauge: "+mf.String(), http.StatusBadRequest)
				return
			}
			p.values[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
		}
		mu.Lock()
		pushes = append(pushes, p)
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	at := time.Date(2026, 10, 5, 9, 30, 0, 0, time.UTC)
	err := PushVerify(t.Context(), srv.URL, nil, Verification{Week: "2026-W40", Checked: 1234, Mismatches: 2, Finished: at})
	if err != nil {
		t.Fatal(err)
	}
	if len(pushes) != 1 {
		t.Fatalf("%d pushes, want 1", len(pushes))
	}
	p := pushes[0]
	want := map[string]float64{"digest_verify_timestamp_seconds": float64(at.Unix()), "digest_verify_checked": 1234, "digest_verify_mismatches": 2}
	if p.method != http.MethodPut || p.path != "/metrics/job/digest_verify/week/2026-W40" || len(p.values) != 3 {
		t.Fatalf("push %s %s %v; want PUT /metrics/job/digest_verify/week/2026-W40 with %v", p.method, p.path, p.values, want)
	}
	for name, v := range want {
		if p.values[name] != v {
			t.Errorf("%s = %v, want %v", name, p.values[name], v)
		}
	}
	srv.Close()
	if err := PushVerify(t.Context(), srv.URL, nil, Verification{Week: "2026-W40", Finished: at}); err == nil {
		t.Error("push to a closed server: no error")
	}
}
