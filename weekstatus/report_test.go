package weekstatus_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/weekstatus"
)

var allStates = []digest.State{digest.StateClaimed, digest.StateSent, digest.StateRetryable, digest.StateFailed, digest.StateHeld, digest.StateQuarantined, digest.StateAcknowledged}

// Settle counts settled customers (sent, failed, acknowledged, pruned),
// the coverage of the expected ones, and names the verdict and the
// command that moves the week on.
func TestReportSettle(t *testing.T) {
	t.Parallel()
	cutoff := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	n := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name          string
		r             weekstatus.Report
		c             ledger.Counts
		verdict, next string
		settled       int64
		coverage      float64 // -1: none (nothing expected known)
	}{
		{"complete", weekstatus.Report{Pinned: true, Expected: n(4), Customers: weekstatus.Counts{weekstatus.Sent: 2, weekstatus.Failed: 1, weekstatus.Acknowledged: 1, weekstatus.Suppressed: 3}},
			ledger.Counts{ByState: map[digest.State]int64{digest.StateSent: 2}}, weekstatus.VerdictComplete, "", 4, 1},
		{"a held receipt of the week needs review", weekstatus.Report{Pinned: true, Expected: n(2), Customers: weekstatus.Counts{weekstatus.Sent: 2}},
			ledger.Counts{ByState: map[digest.State]int64{digest.StateHeld: 1}}, weekstatus.VerdictReview, "digest review list --week 2026-W48", 2, 1},
		{"not pinned", weekstatus.Report{Customers: weekstatus.Counts{weekstatus.Pending: 5}},
			ledger.Counts{}, weekstatus.VerdictNotRun, "digest run --week 2026-W48", 0, -1},
		{"remaining", weekstatus.Report{Pinned: true, Expected: n(4), Customers: weekstatus.Counts{weekstatus.Sent: 1, weekstatus.InFlight: 3}},
			ledger.Counts{}, weekstatus.VerdictRemaining, "digest run --week 2026-W48", 1, 0.25},
		{"partial cutoff", weekstatus.Report{Pinned: true, Cutoff: cutoff, CutoffOpen: true, Expected: n(1), Customers: weekstatus.Counts{weekstatus.Sent: 1}},
			ledger.Counts{}, weekstatus.VerdictPartial, "digest repin --week 2026-W48 --reason ... (after 2026-11-30T04:00:00Z)", 1, 1},
		{"nothing expected is covered", weekstatus.Report{Pinned: true, Expected: n(0), Customers: weekstatus.Counts{}},
			ledger.Counts{}, weekstatus.VerdictComplete, "", 0, 1},
	} {
		r := tc.r
		r.Week = "2026-W48"
		r.Settle(tc.c, allStates)
		if r.Verdict != tc.verdict || r.NextCommand != tc.next || r.Settled != tc.settled {
			t.Errorf("%s: verdict %q, next %q, settled %d; want %q, %q, %d", tc.name, r.Verdict, r.NextCommand, r.Settled, tc.verdict, tc.next, tc.settled)
		}
		switch {
		case tc.coverage < 0 && (r.Coverage != nil || r.Remaining != nil):
			t.Errorf("%s: coverage and remaining without an expected count", tc.name)
		case tc.coverage >= 0 && (r.Coverage == nil || *r.Coverage != tc.coverage || r.Remaining == nil || *r.Remaining != r.Undecided):
			t.Errorf("%s: coverage %v, remaining %v (undecided %d); want coverage %v", tc.name, r.Coverage, r.Remaining, r.Undecided, tc.coverage)
		}
		// Every state is listed, zeros included: scripts read each key.
		if len(r.Receipts) != len(allStates) {
			t.Errorf("%s: receipts %v; want every state", tc.name, r.Receipts)
		}
	}
}

// A tombstone of the week marks it pruned when it is of the report's
// type and version, or of every type; another week's or type's does not.
func TestReportMarkPruned(t *testing.T) {
	t.Parallel()
	w48, w47 := digest.ISOWeek{Year: 2026, Week: 48}, digest.ISOWeek{Year: 2026, Week: 47}
	stone := func(w digest.ISOWeek, typ, version string, n int64) digest.PruneTombstone {
		return digest.PruneTombstone{Pin: digest.SnapshotPin{Week: w, Type: typ, Version: version}, ReceiptsPruned: n}
	}
	for _, tc := range []struct {
		name   string
		stones []digest.PruneTombstone
		want   int64 // receipts pruned; 0: not pruned
	}{
		{"its type and version", []digest.PruneTombstone{stone(w48, "weekly_activity", "v1", 7)}, 7},
		{"every type", []digest.PruneTombstone{stone(w48, "", "", 9)}, 9},
		{"another version", []digest.PruneTombstone{stone(w48, "weekly_activity", "v2", 7)}, 0},
		{"another week", []digest.PruneTombstone{stone(w47, "", "", 3)}, 0},
	} {
		r := weekstatus.Report{Week: w48.String(), Type: "weekly_activity", Version: "v1"}
		r.MarkPruned(tc.stones)
		if r.Pruned != (tc.want > 0) || r.PrunedReceipts != tc.want {
			t.Errorf("%s: pruned %v (%d receipts); want %d receipts", tc.name, r.Pruned, r.PrunedReceipts, tc.want)
		}
	}
}

// The report's JSON keeps its field names (scripts and alerts read them),
// and CutoffOpen, a working value, is not among them.
func TestReportJSONNames(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(weekstatus.Report{CutoffOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{`"week"`, `"as_of"`, `"expected"`, `"receipts"`, `"coverage"`, `"last_run"`, `"partial_cutoff"`,
		`"customers"`, `"next_command"`, `"verdict"`, `"exit_code"`, `"counted_from"`} {
		if !strings.Contains(string(b), name) {
			t.Errorf("JSON lacks %s: %s", name, b)
		}
	}
	if strings.Contains(strings.ToLower(string(b)), "cutoff_open") || strings.Contains(string(b), "CutoffOpen") {
		t.Errorf("JSON carries the working value CutoffOpen: %s", b)
	}
}
