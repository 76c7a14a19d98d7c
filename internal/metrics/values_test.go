package metrics

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/run"
)

// Values holds every series a run's push carries, by its Prometheus name,
// with the values the push has, and survives JSON.
func TestValuesAreWhatThePushCarries(t *testing.T) {
	t.Parallel()
	r := New()
	var lat run.LatencyHistogram
	lat.Observe(3*time.Millisecond, 10)
	lat.Observe(40*time.Millisecond, 2)
	end := time.Date(2026, 11, 30, 6, 1, 0, 0, time.UTC)
	sum := run.Summary{Sent: 5, Duplicates: 2, Suppressed: 1, LedgerCalls: 7, Duration: 2 * time.Second}
	r.ObserveRun(Run{Summary: sum, Latency: &lat, Counts: &ledger.Counts{ByState: map[digest.State]int64{digest.StateSent: 9}}, Finished: end})

	v, err := r.Values()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	// Every series of the push, and nothing else.
	var want []string
	mfs, err := r.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetType().String() == "HISTOGRAM" {
			want = append(want, mf.GetName()+"_bucket", mf.GetName()+"_sum", mf.GetName()+"_count")
			continue
		}
		want = append(want, mf.GetName())
	}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, slices.Sorted(slices.Values(want))) {
		t.Errorf("Values has %v; want the push's series %v", keys, want)
	}
	at := func(path ...string) any {
		t.Helper()
		var x any = got
		for _, p := range path {
			m, ok := x.(map[string]any)
			if !ok {
				t.Fatalf("%v: %v is not an object", path, x)
			}
			x = m[p]
		}
		return x
	}
	for _, c := range []struct {
		path []string
		want float64
	}{
		{[]string{"digest_digests_total", "outcome", "sent"}, 5},
		{[]string{"digest_digests_total", "outcome", "suppressed"}, 1},
		{[]string{"digest_digests_total", "outcome", "failed"}, 0},
		{[]string{"digest_ledger_calls_total"}, 7},
		{[]string{"digest_receipts", "state", "sent"}, 9},
		{[]string{"digest_run_duration_seconds"}, 2},
		{[]string{"digest_last_run_timestamp_seconds"}, float64(end.Unix())},
		{[]string{"digest_last_success_timestamp_seconds"}, float64(end.Unix())},
		{[]string{"digest_claim_latency_seconds_bucket", "le", "0.005"}, 10},
		{[]string{"digest_claim_latency_seconds_bucket", "le", "0.05"}, 12},
		{[]string{"digest_claim_latency_seconds_bucket", "le", "+Inf"}, 12},
		{[]string{"digest_claim_latency_seconds_count"}, 12},
	} {
		if v := at(c.path...); v != c.want {
			t.Errorf("%v = %v; want %v", c.path, v, c.want)
		}
	}
}

// A value no JSON number holds is Prometheus's string for it, and a
// series with two labels nests once per label.
func TestValuesOfOddSeries(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "g"}, []string{"a", "b"})
	g.WithLabelValues("x", "y").Set(math.Inf(1))
	g.WithLabelValues("x", "z").Set(math.NaN())
	reg.MustRegister(g)
	v, err := Values(reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"g":{"a":{"x":{"b":{"y":"+Inf","z":"NaN"}}}}}`; string(b) != want {
		t.Errorf("Values = %s; want %s", b, want)
	}
}
