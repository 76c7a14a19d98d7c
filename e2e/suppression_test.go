package e2e

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/e2etest"
)

// "digest suppression": customers suppressed by id, by address and by the
// address_key of a log line get nothing and are counted as suppressed, with
// no receipt; a removal needs a reason, is in the history, and the next run
// of the same week reaches the customer. Nothing in the ledger names them.
func TestSuppressionCommandHonouredByTheRun(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(40, week40)
	ctx := context.Background()
	var addrs []string
	for a := range want {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	byID, byAddr, byKey := addrs[0], addrs[1], addrs[2]
	var id string
	if err := e.Pool.QueryRow(ctx, `SELECT customer_id FROM digest_customers WHERE email = $1`, byID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	kr, err := digest.ParseKeyring(e2etest.TestKeyring)
	if err != nil {
		t.Fatal(err)
	}
	e.MustRun("suppression", "add", "--customer", id, "--by", "alice")
	out := e.MustRun("suppression", "add", "--address", strings.ToUpper(byAddr), "--reason", "complaint", "--by", "alice")
	if !strings.Contains(out.Stdout, "suppressed address") {
		t.Fatalf("add said %q", out.Stdout)
	}
	e.MustRun("suppression", "add", "--address-key", kr.AddressKey(byKey), "--reason", "hard_bounce")
	if again := e.MustRun("suppression", "add", "--customer", id); !strings.Contains(again.Stdout, "already suppressed") {
		t.Fatalf("second add said %q", again.Stdout)
	}
	if r := e.Run("suppression", "add", "--customer", id, "--reason", "bored"); r.Code != 2 {
		t.Fatalf("unknown reason: exit %d, want 2", r.Code)
	}
	if r := e.Run("suppression", "remove", "--customer", id); r.Code != 2 {
		t.Fatalf("remove without a reason: exit %d, want 2", r.Code)
	}
	list := e.MustRun("suppression", "list")
	if n := strings.Count(list.Stdout, "\n"); n != 4 || !strings.Contains(list.Stdout, "complaint") || strings.Contains(list.Stdout, "@") || strings.Contains(list.Stdout, id) {
		t.Fatalf("list: want a header and three keys, no address or id:\n%s", list.Stdout)
	}

	first := e.MustRun("run", "--week", "2026-W40")
	kept := map[string]bool{}
	for a := range want {
		kept[a] = a != byID && a != byAddr && a != byKey
	}
	for a, k := range kept {
		if !k {
			delete(kept, a)
		}
	}
	e.AssertExactlyOnce(kept)
	if first.Count(t, "suppressed") != 3 || first.Count(t, "sent") != len(kept) {
		t.Fatalf("first run: %v; want 3 suppressed, %d sent", first.Summary(t), len(kept))
	}
	if r := e.Receipts(); r["sent"] != len(kept) || len(r) != 1 {
		t.Fatalf("receipts %v, want %d sent only", r, len(kept))
	}

	e.MustRun("suppression", "remove", "--customer", id, "--reason", "subscribed again (OPS-210)", "--by", "bob")
	if r := e.Run("suppression", "remove", "--customer", id, "--reason", "again"); r.Code != 1 {
		t.Fatalf("removing what is not there: exit %d, want 1", r.Code)
	}
	hist := e.MustRun("suppression", "list", "--customer", id, "--history")
	if !strings.Contains(hist.Stdout, "add") || !strings.Contains(hist.Stdout, "remove") || !strings.Contains(hist.Stdout, "subscribed again (OPS-210)") || !strings.Contains(hist.Stdout, "bob") {
		t.Fatalf("history:\n%s", hist.Stdout)
	}
	second := e.MustRun("run", "--week", "2026-W40")
	kept[byID] = true
	e.AssertExactlyOnce(kept)
	if second.Count(t, "sent") != 1 || second.Count(t, "suppressed") != 2 {
		t.Fatalf("second run: %v; want the removed one sent, 2 still suppressed", second.Summary(t))
	}
	var stored int
	if err := e.Pool.QueryRow(ctx, `SELECT count(*) FROM suppressions s, suppression_events h WHERE s.key ~ '@' OR h.key ~ '@' OR h.note ~ '@'`).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("an address in the suppression tables: %d, %v", stored, err)
	}
}
