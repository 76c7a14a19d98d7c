package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/e2etest"
	"github.com/weeklydigest/digest/snapshot"
)

// cutoffStatus is what "status --json" says of a week's cutoff and its
// customers (issue 19).
type cutoffStatus struct {
	Pinned            bool             `json:"pinned"`
	AsOf              *time.Time       `json:"as_of"`
	Cutoff            time.Time        `json:"cutoff"`
	PartialCutoff     bool             `json:"partial_cutoff"`
	EarlyPin          bool             `json:"early_pin"`
	RepinnedFrom      *time.Time       `json:"repinned_from"`
	ExcludedRows      *int             `json:"excluded_rows"`
	ExcludedCustomers *int             `json:"excluded_customers"`
	Customers         map[string]int   `json:"customers"`
	Undecided         int              `json:"undecided"`
	NextCommand       string           `json:"next_command"`
	Receipts          map[string]int   `json:"receipts"`
	Verdict           string           `json:"verdict"`
	ExitCode          int              `json:"exit_code"`
	LastRun           *json.RawMessage `json:"last_run"`
}

func cutoffStatusOf(t *testing.T, e *e2etest.Env, week digest.ISOWeek, wantCode int, extra ...string) (cutoffStatus, e2etest.Result) {
	t.Helper()
	r := e.RunEnv(extra, "status", "--week", week.String(), "--json")
	var s cutoffStatus
	if err := json.Unmarshal([]byte(r.Stdout), &s); err != nil {
		t.Fatalf("status --json: %v\n%s%s", err, r.Stdout, r.Stderr)
	}
	if r.Code != wantCode || s.ExitCode != wantCode {
		t.Fatalf("status --week %s: exit %d (says %d), want %d\n%s%s", week, r.Code, s.ExitCode, wantCode, r.Stdout, r.Stderr)
	}
	return s, r
}

// addActivity records one activity row of customer, occurred at and
// recorded at the database's now() plus the given offsets.
func addActivity(t *testing.T, e *e2etest.Env, customer string, occurred time.Time, recorded string) {
	t.Helper()
	if _, err := e.Pool.Exec(context.Background(), `INSERT INTO digest_activity (customer_id, occurred_at, recorded_at, kind, amount_minor, currency, description)
		VALUES ($1, $2, `+recorded+`, 'fee', -100, 'EUR', 'late fee')`, customer, occurred); err != nil {
		t.Fatal(err)
	}
}

// noActivity returns the ids of the synthetic customers without activity.
func noActivity(n int, week digest.ISOWeek) []string {
	var out []string
	for r := range snapshot.Synthetic(n, week, 1) {
		if len(r.Activity) == 0 {
			out = append(out, r.Customer.ID)
		}
	}
	return out
}

// Issue 19, item 1: an observe run of a week before its cutoff pinned
// "now", and the week's real run then left out everything recorded later.
// Observe pins nothing; the run after the cutoff (the week's end plus
// DIGEST_SETTLE) reads the week as of the cutoff and sends the customer
// whose only activity was recorded after the observe run.
func TestObserveBeforeTheCutoffThenRunSendsAll(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	week := digest.PreviousWeekOf(time.Now(), time.UTC)
	want := e.Seed(40, week)
	// A settle time that puts the cutoff a few seconds from now.
	cutoff := time.Now().Add(8 * time.Second).Truncate(time.Second)
	e.Set("DIGEST_SETTLE", cutoff.Sub(week.End(time.UTC)).String())

	e.MustRun("run", "--week", week.String(), "--mode", "observe")
	if s, _ := cutoffStatusOf(t, e, week, 3); s.Pinned || s.Verdict != "not_run_yet" || s.Customers["observed_not_sent"] != len(want) {
		t.Fatalf("after an observe run: %+v; want not pinned, %d observed", s, len(want))
	}
	// Recorded after the observe run, by the cutoff.
	late := noActivity(40, week)[0]
	addActivity(t, e, late, week.Start(time.UTC).Add(50*time.Hour), fmt.Sprintf("'%s'::timestamptz", cutoff.Add(-time.Second).Format(time.RFC3339)))
	e2etest.WaitFor(t, 20*time.Second, "the cutoff", func() bool { return time.Now().After(cutoff) })

	e.MustRun("run", "--week", week.String())
	want[fmt.Sprintf("customer%s@example.com", strings.TrimPrefix(late, "cust_"))] = true
	e.AssertExactlyOnce(want)
	s, _ := cutoffStatusOf(t, e, week, 0)
	if s.AsOf == nil || !s.AsOf.Equal(cutoff) || s.PartialCutoff || s.EarlyPin || s.Verdict != "complete" {
		t.Fatalf("status: %+v; want pinned at the cutoff %v, complete", s, cutoff)
	}
}

// Issue 19: a run of a week before its cutoff is refused (exit 2), naming
// the week's end; --early-cutoff sends it with a partial cutoff, which
// status reports with what it left out.
func TestRunBeforeTheCutoffRefusedThenEarlyCutoffIsPartial(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	week := digest.WeekOf(time.Now(), time.UTC) // not over
	e.Seed(30, week)
	addActivity(t, e, "cust_0000001", time.Now().Add(-time.Minute), "now() - interval '1 minute'")

	r := e.Run("run", "--week", week.String())
	end := week.End(time.UTC).Format(time.RFC3339)
	if r.Code != 2 || !strings.Contains(r.Stderr, end) || !strings.Contains(r.Stderr, "--early-cutoff") {
		t.Fatalf("run before the cutoff: exit %d, want 2 naming the end %s and --early-cutoff\n%s", r.Code, end, r.Stderr)
	}
	if n := e.MailpitCount(); n != 0 {
		t.Fatalf("a refused run sent %d messages", n)
	}
	if s, _ := cutoffStatusOf(t, e, week, 3); s.Pinned {
		t.Fatalf("a refused run pinned the week: %+v", s)
	}

	early := e.MustRun("run", "--week", week.String(), "--early-cutoff")
	if !strings.Contains(early.Stderr, "partial cutoff") || early.Count(t, "sent") == 0 {
		t.Fatalf("early run: want a warning and some sent\n%s", early.Stderr)
	}
	// Activity recorded after the cutoff, of a customer who had none.
	late := noActivity(30, week)[0]
	addActivity(t, e, late, time.Now().Add(-time.Minute), "now()")
	s, st := cutoffStatusOf(t, e, week, 3)
	if !s.PartialCutoff || s.Verdict != "partial_cutoff" || s.ExcludedRows == nil || *s.ExcludedRows < 1 ||
		*s.ExcludedCustomers < 1 || s.Customers["excluded_by_cutoff"] < 1 {
		t.Fatalf("status after an early cutoff: %+v", s)
	}
	if !strings.Contains(st.Stderr, "partial cutoff") {
		t.Fatalf("status must say partial cutoff:\n%s", st.Stderr)
	}
	text := e.Run("status", "--week", week.String())
	wantLines(t, "status after an early cutoff", text.Stdout, `^pin +partial cutoff`, `^excluded by the cutoff +\d+ activity rows of \d+ customers`, `^verdict +partial_cutoff$`)
}

// Issue 19: a week pinned early by an older version (as_of mid-week, not
// marked partial) is reported by runs and status; "digest repin" moves it
// to the cutoff, and the next run sends the customers it left out,
// quarantines the sent digests whose content changed, and sends nobody
// twice.
func TestOldEarlyPinRepinnedSendsTheRestOnce(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	const n = 120
	want := e.Seed(n, week40)
	asOf := week40.Start(time.UTC).Add(3*24*time.Hour + 12*time.Hour) // Thursday noon
	// As the old code pinned it: as_of = the first run's now, no zone or
	// key id yet (a later run adopts its own), not partial.
	if _, err := e.Pool.Exec(context.Background(), `INSERT INTO snapshot_pins (digest_type, iso_week, version, as_of, created_at)
		VALUES ('weekly_activity', '2026-W40', 'v1', $1, $1)`, asOf); err != nil {
		t.Fatal(err)
	}
	var before, changed, onlyLater int
	for r := range snapshot.Synthetic(n, week40, 1) {
		early, late := 0, 0
		for _, a := range r.Activity {
			if a.RecordedAt.After(asOf) {
				late++
			} else {
				early++
			}
		}
		switch {
		case early > 0 && late > 0:
			changed++
			before++
		case early > 0:
			before++
		case late > 0:
			onlyLater++
		}
	}
	if changed == 0 || onlyLater == 0 {
		t.Fatalf("the test needs customers with activity on both sides of as_of (%d) and only after (%d)", changed, onlyLater)
	}

	first := e.MustRun("run", "--week", "2026-W40")
	if !strings.Contains(first.Stderr, "early pin") || first.Count(t, "sent") != before {
		t.Fatalf("run on an early pin: sent %d, want %d, and a warning\n%s", first.Count(t, "sent"), before, first.Stderr)
	}
	s, st := cutoffStatusOf(t, e, week40, 3)
	if !s.EarlyPin || s.Verdict != "partial_cutoff" || *s.ExcludedCustomers != changed+onlyLater || s.Customers["excluded_by_cutoff"] != onlyLater ||
		!strings.Contains(s.NextCommand, "digest repin --week 2026-W40") || !strings.Contains(st.Stderr, "early pin") {
		t.Fatalf("status of an early pin: %+v\n%s", s, st.Stderr)
	}

	if r := e.Run("repin", "--week", "2026-W40"); r.Code != 2 || !strings.Contains(r.Stderr, "--reason") {
		t.Fatalf("repin without a reason: exit %d\n%s", r.Code, r.Stderr)
	}
	rp := e.MustRun("repin", "--week", "2026-W40", "--reason", "pinned on Thursday by an old binary", "--by", "oncall")
	if !strings.Contains(rp.Stdout, "2026-10-05T04:00:00Z") {
		t.Fatalf("repin said: %s", rp.Stdout)
	}
	if r := e.Run("repin", "--week", "2026-W40", "--reason", "again"); r.Code != 2 {
		t.Fatalf("second repin: exit %d, want 2 (not early)\n%s", r.Code, r.Stderr)
	}
	s, _ = cutoffStatusOf(t, e, week40, 3)
	if s.EarlyPin || s.RepinnedFrom == nil || !s.RepinnedFrom.Equal(asOf) || s.Verdict != "remaining" || s.Customers["pending"] != onlyLater {
		t.Fatalf("status after the repin: %+v; want %d pending, repinned from %v", s, onlyLater, asOf)
	}

	rest := e.Run("run", "--week", "2026-W40")
	if rest.Code != 4 || rest.Count(t, "sent") != onlyLater || rest.Count(t, "quarantined") != changed {
		t.Fatalf("run after the repin: exit %d, %v; want exit 4, %d sent, %d quarantined\n%s", rest.Code, rest.Summary(t), onlyLater, changed, rest.Stderr)
	}
	e.AssertExactlyOnce(want) // every customer with activity, once
	s, _ = cutoffStatusOf(t, e, week40, 4)
	if s.Customers["sent"] != before-changed+onlyLater || s.Customers["quarantined"] != changed || s.Undecided != 0 {
		t.Fatalf("status after the rest was sent: %+v", s)
	}
}

// Issue 19, item 2: a cohort run left the other customers unsent while
// everything said success. Status names them as the cohort's remainder,
// with the command that sends them, and the week is complete only after
// that command.
func TestCohortRemainderNamedThenSent(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(200, week40)
	cohort := e.MustRun("run", "--week", "2026-W40", "--cohort", "10")
	sent := cohort.Count(t, "sent")
	if sent == 0 || sent == len(want) || !strings.Contains(cohort.Stderr, "cohort's remainder") || !strings.Contains(cohort.Stderr, "digest run --week 2026-W40") {
		t.Fatalf("cohort run: sent %d of %d; its log must name the remainder and the command\n%s", sent, len(want), cohort.Stderr)
	}
	s, st := cutoffStatusOf(t, e, week40, 3)
	if s.Verdict != "remaining" || s.Customers["observed_not_sent"] != len(want)-sent || s.Customers["sent"] != sent ||
		s.NextCommand != "digest run --week 2026-W40" || !strings.Contains(st.Stderr, "digest run --week 2026-W40") {
		t.Fatalf("status after a cohort run: %+v\n%s", s, st.Stderr)
	}
	text := e.Run("status", "--week", "2026-W40")
	wantLines(t, "status after a cohort run", text.Stdout, fmt.Sprintf(`^observed, not sent +%d: the cohort's remainder`, len(want)-sent), `^verdict +remaining$`)

	e.MustRun("run", "--week", "2026-W40")
	e.AssertExactlyOnce(want)
	if s, _ := cutoffStatusOf(t, e, week40, 0); s.Verdict != "complete" || s.Customers["sent"] != len(want) || s.Undecided != 0 {
		t.Fatalf("status after the plain run: %+v", s)
	}
}

// Issue 19: a repin while a run of the week is under way. The run reads
// the old cutoff to its end; repin refuses while the week has claimed
// receipts, and whichever way the two interleave, the run after the repin
// sends the rest and nobody gets a digest twice.
func TestRepinDuringARunSendsNobodyTwice(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(300, week40)
	asOf := week40.Start(time.UTC).Add(4 * 24 * time.Hour) // Friday 00:00
	if _, err := e.Pool.Exec(context.Background(), `INSERT INTO snapshot_pins (digest_type, iso_week, version, as_of, created_at)
		VALUES ('weekly_activity', '2026-W40', 'v1', $1, $1)`, asOf); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := e.Command(ctx, []string{"DIGEST_RATE=100", "DIGEST_BURST=1"}, "run", "--week", "2026-W40")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e2etest.WaitFor(t, time.Minute, "the run to send", func() bool {
		n, err := e.Mailpit.Count(context.Background())
		return err == nil && n >= 20
	})
	refused, moved := 0, false
	for !moved && cmd.ProcessState == nil {
		r := e.Run("repin", "--week", "2026-W40", "--reason", "during a run")
		switch r.Code {
		case 3:
			refused++
			if !strings.Contains(r.Stderr, "claimed receipts") {
				t.Fatalf("repin refused without saying why:\n%s", r.Stderr)
			}
		case 0:
			moved = true
		default:
			t.Fatalf("repin during a run: exit %d\n%s", r.Code, r.Stderr)
		}
		if refused >= 3 {
			break
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the run under way: %v", err)
	}
	if !moved {
		e.MustRun("repin", "--week", "2026-W40", "--reason", "after the run")
	}
	rest := e.Run("run", "--week", "2026-W40")
	if rest.Code != 0 && rest.Code != 4 {
		t.Fatalf("run after the repin: exit %d\n%s", rest.Code, rest.Stderr)
	}
	e.AssertExactlyOnce(want)
	t.Logf("NUMBERS repin during a run: refused %d times, moved mid-run %v; after: %v", refused, moved, rest.Summary(t))
}
