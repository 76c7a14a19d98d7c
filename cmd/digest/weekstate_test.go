package main

import (
	"context"
	"testing"
)

const weekState48 = "job=digest_week,week=2026-W48"

// Issue 19: the week's state is pushed after every run of the week and
// after status, replacing the week's group: a cohort run leaves it not
// complete (its remainder observed, not sent), the plain run completes it.
func TestRunsAndStatusPushTheWeekState(t *testing.T) {
	t.Parallel()
	pg, srv := newPushgateway(t)
	env, stderr := metricsEnv(t, map[string]string{"DIGEST_PUSHGATEWAY_URL": srv.URL})
	ctx := context.Background()
	main := func(want int, args ...string) {
		t.Helper()
		if code := Main(ctx, args, env); code != want {
			t.Fatalf("digest %v: exit %d, want %d; stderr:\n%s", args, code, want, stderr)
		}
	}
	snap := "../../examples/snapshot.jsonl"
	main(ExitOK, "run", "--snapshot", snap, "--week", "2026-W48", "--cohort", "10")
	cohortSent, _ := pg.value(weekState48, "digest_week_customers", "outcome", "sent")
	observed, _ := pg.value(weekState48, "digest_week_customers", "outcome", "observed_not_sent")
	if cohortSent+observed != 20 || observed == 0 {
		t.Fatalf("after the cohort run: %v sent and %v observed, want 20 in all, some observed", cohortSent, observed)
	}
	checkSamples(t, pg, weekState48, []wantSample{
		{"digest_week_complete", nil, 0},
		{"digest_week_needs_review", nil, 0},
		{"digest_week_customers", []string{"outcome", "suppressed"}, 1},
		{"digest_week_customers", []string{"outcome", "pending"}, 0},
		{"digest_week_end_timestamp_seconds", nil, 1795996800}, // 2026-11-30T00:00:00Z
	})
	main(ExitOK, "run", "--snapshot", snap, "--week", "2026-W48")
	checkSamples(t, pg, weekState48, []wantSample{
		{"digest_week_complete", nil, 1},
		{"digest_week_customers", []string{"outcome", "sent"}, 20},
		{"digest_week_customers", []string{"outcome", "observed_not_sent"}, 0},
	})
	before := pg.pushCount()
	main(ExitOK, "status", "--snapshot", snap, "--week", "2026-W48")
	if pg.pushCount() != before+1 {
		t.Fatalf("status pushed %d times, want once", pg.pushCount()-before)
	}
	checkSamples(t, pg, weekState48, []wantSample{{"digest_week_complete", nil, 1}})
}
