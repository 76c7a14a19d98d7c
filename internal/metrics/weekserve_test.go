package metrics

import (
	"fmt"
	"testing"
	"time"
)

// ObserveWeekState serves each week's latest state labelled by week,
// replacing the week's earlier state, and keeps only the newest eight
// weeks a long-running schedule ran.
func TestObserveWeekStateServesTheNewestWeeks(t *testing.T) {
	t.Parallel()
	r := New()
	end := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	for i := range 10 {
		r.ObserveWeekState(WeekState{Week: fmt.Sprintf("2026-W%02d", i+1), End: end.AddDate(0, 0, 7*i), NeedsReview: 2, At: end,
			Customers: map[string]int64{"sent": 5}})
	}
	r.ObserveWeekState(WeekState{Week: "2026-W10", End: end.AddDate(0, 0, 63), Complete: true, At: end})
	mfs, err := r.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	complete := map[string]float64{}
	customers := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "digest_week_complete":
				complete[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			case "digest_week_customers":
				customers++
			}
		}
	}
	if len(complete) != servedWeeks {
		t.Fatalf("weeks served: %v; want the newest %d", complete, servedWeeks)
	}
	if _, old := complete["2026-W02"]; old {
		t.Errorf("2026-W02 still served among %v; want the newest %d only", complete, servedWeeks)
	}
	if complete["2026-W10"] != 1 || complete["2026-W09"] != 0 {
		t.Errorf("digest_week_complete %v; want 2026-W10 complete (its later state), 2026-W09 not", complete)
	}
	if customers != servedWeeks-1 { // W10's later state counted no customers
		t.Errorf("%d digest_week_customers series; want %d", customers, servedWeeks-1)
	}
}
