package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/internal/e2etest"
)

// suppressedStatus is what the tests below read of "status --json".
type suppressedStatus struct {
	Verdict   string           `json:"verdict"`
	ExitCode  int              `json:"exit_code"`
	Expected  *int64           `json:"expected"`
	Remaining *int64           `json:"remaining"`
	Customers map[string]int64 `json:"customers"`
}

// wantSettledWithSuppressed fails unless "status" with args says the
// week is complete (exit 0) with want customers suppressed and none
// pending, in the fast count and with --customers, in text and --json.
func wantSettledWithSuppressed(t *testing.T, e *e2etest.Env, want int64, args ...string) {
	t.Helper()
	for _, extra := range [][]string{nil, {"--customers"}} {
		a := append(append([]string{"status"}, args...), extra...)
		r := e.Run(append(a, "--json")...)
		var st suppressedStatus
		if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
			t.Fatalf("%v --json: %v\n%s%s", a, err, r.Stdout, r.Stderr)
		}
		if r.Code != 0 || st.Verdict != "complete" || st.Customers["suppressed"] != want || st.Customers["pending"] != 0 ||
			st.Remaining == nil || *st.Remaining != 0 {
			t.Fatalf("%v --json: exit %d; want complete (0) with %d suppressed, none pending or remaining:\n%s", a, r.Code, want, r.Stdout)
		}
		text := e.Run(a...)
		if text.Code != 0 || strings.Contains(text.Stdout, "pending") {
			t.Fatalf("%v: exit %d, want 0 and no pending line:\n%s%s", a, text.Code, text.Stdout, text.Stderr)
		}
		wantLines(t, strings.Join(a, " "), text.Stdout, `^ +suppressed +[0-9]+$`)
	}
}

// Issue 35 defect 1: a customer on the ledger's suppression list (by
// customer id, and by address) is suppressed, a decided outcome, not
// pending: the week is complete in the fast count and reading every
// customer, and the run's summary says so. Before the fix status exited
// 3 with the suppressed customers pending for ever.
func TestListSuppressedCustomerSettlesTheWeek(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(60, week40)
	ctx := context.Background()
	var id, addr string
	if err := e.Pool.QueryRow(ctx, `SELECT customer_id FROM digest_customers ORDER BY customer_id LIMIT 1`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := e.Pool.QueryRow(ctx, `SELECT email FROM digest_customers ORDER BY customer_id DESC LIMIT 1`).Scan(&addr); err != nil {
		t.Fatal(err)
	}
	var idAddr string
	if err := e.Pool.QueryRow(ctx, `SELECT email FROM digest_customers WHERE customer_id = $1`, id).Scan(&idAddr); err != nil {
		t.Fatal(err)
	}
	e.MustRun("suppression", "add", "--customer", id, "--by", "alice")
	e.MustRun("suppression", "add", "--address", addr, "--reason", "complaint", "--by", "alice")

	run := e.MustRun("run", "--week", "2026-W40")
	delete(want, idAddr)
	delete(want, addr)
	e.AssertExactlyOnce(want)
	if run.Count(t, "suppressed") != 2 || run.Count(t, "sent") != len(want) {
		t.Fatalf("run summary %v; want 2 suppressed, %d sent", run.Summary(t), len(want))
	}
	wantSettledWithSuppressed(t, e, 2, "--week", "2026-W40")

	// The next run of the week changes nothing and still settles it.
	again := e.MustRun("run", "--week", "2026-W40")
	if again.Count(t, "sent") != 0 {
		t.Fatalf("second run sent: %v", again.Summary(t))
	}
	e.AssertExactlyOnce(want)
	wantSettledWithSuppressed(t, e, 2, "--week", "2026-W40")
}

// The same on the embedded default (SQLite ledger, file outbox, the
// sample snapshot).
func TestListSuppressedCustomerSettlesASnapshotWeek(t *testing.T) {
	t.Parallel()
	e := sampleEnv(t)
	snap := []string{"--week", "2026-W48", "--snapshot", "examples/snapshot.jsonl"}
	e.MustRun("suppression", "add", "--customer", "cust_0001", "--by", "alice")
	r := e.MustRun(append([]string{"run"}, snap...)...)
	if r.Count(t, "suppressed") < 1 {
		t.Fatalf("run summary %v; want cust_0001 suppressed", r.Summary(t))
	}
	wantSettledWithSuppressed(t, e, int64(r.Count(t, "suppressed")), snap...)
}
