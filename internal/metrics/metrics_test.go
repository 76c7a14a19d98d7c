package metrics

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// families gathers r by metric name.
func families(t *testing.T, r *Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := r.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func TestObserveRunAddsUpAndSetsGauges(t *testing.T) {
	t.Parallel()
	r := New()
	var lat digest.LatencyHistogram
	lat.Observe(3*time.Millisecond, 10)
	lat.Observe(40*time.Millisecond, 2)
	end := time.Date(2026, 11, 30, 6, 1, 0, 0, time.UTC)
	sum := digest.Summary{Sent: 5, Duplicates: 2, Retryable: 1, LookupsFound: 1, LedgerCalls: 7, Duration: 2 * time.Second}
	sum.DuplicateAges[digest.AgeSameDay] = 2
	counts := &ledger.Counts{ByState: map[digest.State]int64{digest.StateHeld: 3}, OldestRetryable: time.Minute}
	r.ObserveRun(Run{Summary: sum, Latency: &lat, Counts: counts, ExitCode: 3, Finished: end})
	r.ObserveRun(Run{Summary: sum, ExitCode: 0, Finished: end.Add(time.Hour)})

	fam := families(t, r)
	value := func(name, label, val string) float64 {
		t.Helper()
		for _, m := range fam[name].GetMetric() {
			if label == "" || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetName() == label && m.GetLabel()[0].GetValue() == val) {
				switch {
				case m.Counter != nil:
					return m.GetCounter().GetValue()
				case m.Gauge != nil:
					return m.GetGauge().GetValue()
				}
			}
		}
		t.Fatalf("%s{%s=%q} missing", name, label, val)
		return 0
	}
	for _, c := range []struct {
		name, label, val string
		want             float64
	}{
		{"digest_digests_total", "outcome", "sent", 10},
		{"digest_digests_total", "outcome", "duplicate", 4},
		{"digest_digests_total", "outcome", "failed", 0},
		{"digest_lookups_total", "result", "found", 2},
		{"digest_duplicate_hits_total", "age", "same_day", 4},
		{"digest_ledger_calls_total", "", "", 14},
		{"digest_temporary_retries_total", "", "", 2},
		{"digest_receipts", "state", "held", 3},
		{"digest_oldest_retryable_age_seconds", "", "", 60},
		{"digest_run_exit_code", "", "", 0},
		{"digest_run_duration_seconds", "", "", 2},
		{"digest_last_success_timestamp_seconds", "", "", float64(end.Add(time.Hour).Unix())},
	} {
		if got := value(c.name, c.label, c.val); got != c.want {
			t.Errorf("%s{%s=%q} = %v, want %v", c.name, c.label, c.val, got, c.want)
		}
	}

	h := fam["digest_claim_latency_seconds"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 12 {
		t.Errorf("claim latency count = %d, want 12", h.GetSampleCount())
	}
	for _, b := range h.GetBucket() {
		want := uint64(0)
		switch {
		case b.GetUpperBound() >= 0.05:
			want = 12
		case b.GetUpperBound() >= 0.005:
			want = 10
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%v = %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
}

func TestLastSuccessAbsentUntilARunExitsZero(t *testing.T) {
	t.Parallel()
	r := New()
	r.ObserveRun(Run{ExitCode: 4, Finished: time.Now()})
	if mf, ok := families(t, r)["digest_last_success_timestamp_seconds"]; ok {
		t.Fatalf("last success exported after a failed run: %v", mf)
	}
}
