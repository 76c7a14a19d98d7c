package metrics

import (
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/run"
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

// Each run counts from zero (as a restarted process does), so a counter
// means the same pushed by a Job and served by "digest schedule": the last
// run's count. Gauges keep their last value when a run could not read them.
func TestObserveRunKeepsTheLastRunsCountsAndSetsGauges(t *testing.T) {
	t.Parallel()
	r := New()
	var first, lat run.LatencyHistogram
	first.Observe(time.Second, 99)
	lat.Observe(3*time.Millisecond, 10)
	lat.Observe(40*time.Millisecond, 2)
	end := time.Date(2026, 11, 30, 6, 1, 0, 0, time.UTC)
	big := run.Summary{Sent: 500, Duplicates: 200, Retryable: 100, LookupsFound: 100, LedgerCalls: 700, Failed: 3}
	counts := &ledger.Counts{ByState: map[digest.State]int64{digest.StateHeld: 3}, OldestRetryable: time.Minute}
	r.ObserveRun(Run{Summary: big, Latency: &first, Counts: counts, ExitCode: 3, Finished: end})
	// Two temporary failures on the way (one of them a 421), one row left
	// retryable at the end.
	sum := run.Summary{Sent: 5, Duplicates: 2, Retryable: 1, Retries: 2, Throttled: 1, LookupsFound: 1, LedgerCalls: 7, Duration: 2 * time.Second}
	sum.DuplicateAges[run.AgeSameDay] = 2
	r.ObserveRun(Run{Summary: sum, Latency: &lat, ExitCode: 0, Finished: end.Add(time.Hour)})

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
		{"digest_digests_total", "outcome", "sent", 5},
		{"digest_digests_total", "outcome", "duplicate", 2},
		{"digest_digests_total", "outcome", "failed", 0},
		{"digest_lookups_total", "result", "found", 1},
		{"digest_duplicate_hits_total", "age", "same_day", 2},
		{"digest_ledger_calls_total", "", "", 7},
		{"digest_digests_total", "outcome", "retryable", 1},
		{"digest_temporary_retries_total", "", "", 2},
		{"digest_throttled_total", "", "", 1},
		{"digest_receipts", "state", "held", 3},
		{"digest_oldest_retryable_timestamp_seconds", "", "", float64(end.Add(-time.Minute).Unix())},
		{"digest_oldest_claimed_timestamp_seconds", "", "", 0},
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

func TestNamesListsEveryExportedSeries(t *testing.T) {
	t.Parallel()
	names := Names()
	for _, want := range []string{"digest_digests_total", "digest_claim_latency_seconds_bucket", "digest_oldest_retryable_timestamp_seconds",
		"digest_last_success_timestamp_seconds", "digest_receipts_pruned_total", "digest_last_prune_timestamp_seconds",
		"digest_ledger_oldest_row_timestamp_seconds"} {
		if !slices.Contains(names, want) {
			t.Errorf("Names() lacks %s: %v", want, names)
		}
	}
	for _, n := range names {
		if !strings.HasPrefix(n, Namespace+"_") {
			t.Errorf("Names() has %s, outside the namespace", n)
		}
	}
}

func TestWithRuntimeAddsGoAndProcessMetrics(t *testing.T) {
	t.Parallel()
	fam := families(t, New().WithRuntime())
	for _, want := range []string{"go_goroutines", "go_memstats_heap_inuse_bytes", "process_resident_memory_bytes", "digest_digests_total"} {
		if _, ok := fam[want]; !ok {
			t.Errorf("a registry WithRuntime has no %s", want)
		}
	}
	if _, ok := families(t, New())["go_goroutines"]; ok {
		t.Error("a run's registry (pushed) has go_* metrics")
	}
}
