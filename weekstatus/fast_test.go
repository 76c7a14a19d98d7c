package weekstatus

import (
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// fastCount proves a count or refuses: it never returns a tally in which
// a Send customer without a decided receipt is missing, whatever the
// ledger's counts and the recorded reads say.
func TestFastCountRefusesWhatItCannotProve(t *testing.T) {
	t.Parallel()
	asOf := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	pin := digest.WeekPin{AsOf: asOf, Zone: "UTC", KeyID: "k1"}
	row := func(shard string, send int64, ghosts map[digest.State]int64) ledger.Expectation {
		return ledger.Expectation{Shard: shard, AsOf: asOf, Zone: "UTC", KeyID: "k1", Send: send, Suppressed: 1, Empty: 2,
			Ghosts: ghosts, RunID: "r", RecordedAt: asOf.Add(time.Hour)}
	}
	counts := func(m map[digest.State]int64) ledger.Counts { return ledger.Counts{ByState: m} }
	sent := digest.StateSent
	for _, tc := range []struct {
		name     string
		in       fastInput
		refuse   bool
		complete bool // every Send customer decided
	}{
		{"all sent", fastInput{pin: pin, zone: "UTC", ex: ledger.WeekExpectations{Rows: []ledger.Expectation{row("all", 10, nil)}},
			counts: counts(map[digest.State]int64{sent: 10})}, false, true},
		{"one pending", fastInput{pin: pin, zone: "UTC", ex: ledger.WeekExpectations{Rows: []ledger.Expectation{row("all", 10, nil)}},
			counts: counts(map[digest.State]int64{sent: 9})}, false, false},
		{"a ghost hides a pending customer", fastInput{pin: pin, zone: "UTC",
			ex:     ledger.WeekExpectations{Rows: []ledger.Expectation{row("all", 10, map[digest.State]int64{sent: 1})}},
			counts: counts(map[digest.State]int64{sent: 10})}, false, false},
		{"a live ghost", fastInput{pin: pin, zone: "UTC",
			ex:     ledger.WeekExpectations{Rows: []ledger.Expectation{row("all", 10, map[digest.State]int64{digest.StateHeld: 1})}},
			counts: counts(map[digest.State]int64{sent: 10, digest.StateHeld: 1})}, true, false},
		{"more receipts than digests", fastInput{pin: pin, zone: "UTC", ex: ledger.WeekExpectations{Rows: []ledger.Expectation{row("all", 10, nil)}},
			counts: counts(map[digest.State]int64{sent: 11})}, true, false},
		{"another pin in the week", fastInput{pin: pin, zone: "UTC", ex: ledger.WeekExpectations{OtherPins: 1, Rows: []ledger.Expectation{row("all", 10, nil)}},
			counts: counts(map[digest.State]int64{sent: 10})}, true, false},
		{"repinned since", fastInput{pin: digest.WeekPin{AsOf: asOf.Add(time.Hour), Zone: "UTC", KeyID: "k1"}, zone: "UTC",
			ex: ledger.WeekExpectations{Rows: []ledger.Expectation{row("all", 10, nil)}}, counts: counts(map[digest.State]int64{sent: 10})}, true, false},
		{"a shard missing", fastInput{pin: pin, zone: "UTC", ex: ledger.WeekExpectations{Rows: []ledger.Expectation{row("0/2", 5, nil)}},
			counts: counts(map[digest.State]int64{sent: 5})}, true, false},
		{"a newer read of another layout", fastInput{pin: pin, zone: "UTC", ex: ledger.WeekExpectations{Rows: []ledger.Expectation{
			row("all", 10, nil), func() ledger.Expectation { e := row("0/2", 5, nil); e.RecordedAt = asOf.Add(2 * time.Hour); return e }()}},
			counts: counts(map[digest.State]int64{sent: 10})}, true, false},
		{"unmatched in a week with observations", fastInput{pin: pin, zone: "UTC", ex: ledger.WeekExpectations{Observed: true, Rows: []ledger.Expectation{row("all", 10, nil)}},
			counts: counts(map[digest.State]int64{sent: 9})}, true, false},
		{"records not built", fastInput{pin: pin, zone: "UTC", ex: ledger.WeekExpectations{Rows: []ledger.Expectation{func() ledger.Expectation { e := row("all", 10, nil); e.NotBuilt = 1; return e }()}},
			counts: counts(map[digest.State]int64{sent: 10})}, true, false},
		{"one shard of a week in two states", fastInput{pin: pin, zone: "UTC", shard: digest.Shard{Index: 0, Count: 2},
			ex:     ledger.WeekExpectations{Rows: []ledger.Expectation{row("0/2", 5, nil), row("1/2", 5, nil)}},
			counts: counts(map[digest.State]int64{sent: 9, digest.StateFailed: 1})}, true, false},
		{"one shard of a settled week", fastInput{pin: pin, zone: "UTC", shard: digest.Shard{Index: 0, Count: 2},
			ex:     ledger.WeekExpectations{Rows: []ledger.Expectation{row("0/2", 4, nil), row("1/2", 6, nil)}},
			counts: counts(map[digest.State]int64{sent: 10})}, false, true},
	} {
		ft, why := fastCount(tc.in)
		if tc.refuse != (why != "") {
			t.Errorf("%s: refused %q, want refused %v", tc.name, why, tc.refuse)
			continue
		}
		if why != "" {
			continue
		}
		v := Week{Pinned: true, Customers: ft.customers}.Verdict()
		if (v == VerdictComplete) != tc.complete {
			t.Errorf("%s: verdict %s (customers %v), want complete %v", tc.name, v, ft.customers, tc.complete)
		}
		var send int64
		for o, n := range ft.customers {
			if o != Suppressed && o != SkippedEmpty {
				send += n
			}
		}
		if send != ft.expected {
			t.Errorf("%s: %d customers with a Send digest accounted for, %d expected", tc.name, send, ft.expected)
		}
	}
}
