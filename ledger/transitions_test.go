package ledger_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// diagram renders ledger.Transitions as the package doc draws it.
func diagram() []string {
	orNone := func(s string) string {
		if s == "" {
			return "(none)"
		}
		return s
	}
	lines := []string{fmt.Sprintf("%-13s %-14s %-34s %-13s %-17s %s", "from", "when", "trigger", "to", "by", "history")}
	for _, tr := range ledger.Transitions {
		when := string(tr.When)
		if when == "" {
			when = "-"
		}
		lines = append(lines, strings.TrimRight(fmt.Sprintf("%-13s %-14s %-34s %-13s %-17s %s",
			orNone(string(tr.From)), when, tr.Trigger, orNone(string(tr.To)), tr.By, tr.Row), " "))
	}
	return lines
}

// TestPackageDocDrawsTheTransitions keeps the state diagram in the package
// doc (doc.go) the same as the table the code and the contract suite use.
func TestPackageDocDrawsTheTransitions(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, l := range diagram() {
		want.WriteString("//\t" + l + "\n")
	}
	if !strings.Contains(string(doc), want.String()) {
		t.Errorf("doc.go does not draw ledger.Transitions; its diagram should read:\n%s", want.String())
	}
}

// TestNextFollowsTheDiagram checks the look-up the walk relies on.
func TestNextFollowsTheDiagram(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		from  string
		holds []ledger.Condition
		trig  ledger.Trigger
		to    string
		moves bool
	}{
		{"", nil, ledger.TriggerClaim, "claimed", true},
		{"claimed", []ledger.Condition{ledger.LeaseLive}, ledger.TriggerClaim, "", false},
		{"claimed", []ledger.Condition{ledger.LeaseExpired}, ledger.TriggerClaim, "claimed", true},
		{"retryable", []ledger.Condition{ledger.NotDue}, ledger.TriggerClaim, "", false},
		{"quarantined", []ledger.Condition{ledger.WasSent}, ledger.TriggerRelease, "", false},
		{"quarantined", []ledger.Condition{ledger.NeverSent}, ledger.TriggerRelease, "retryable", true},
		{"held", []ledger.Condition{ledger.NotRunSince}, ledger.TriggerPrune, "", false},
	} {
		tr, moves := ledger.Next(stateOf(tc.from), tc.holds, tc.trig)
		if moves != tc.moves || string(tr.To) != tc.to {
			t.Errorf("%q %v %s: → %q %v, want %q %v", tc.from, tc.holds, tc.trig, tr.To, moves, tc.to, tc.moves)
		}
	}
}

func stateOf(s string) digest.State { return digest.State(s) }
