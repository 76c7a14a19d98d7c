package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/internal/e2etest"
)

// A digest that changes after it was sent (the customer's email changed)
// is quarantined and exits 4; "review release" cannot take it out (it was
// sent), "review acknowledge" does: status no longer needs review, and a
// rerun of the week exits 0 and sends nothing new.
func TestAcknowledgeSentThenChangedEmptiesTheReviewQueue(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(20, week40)
	e.MustRun("run", "--week", "2026-W40")
	e.AssertExactlyOnce(want)
	sent := e.MailpitCount()
	ctx := context.Background()

	var victim string
	if err := e.Pool.QueryRow(ctx, `
		UPDATE digest_customers SET email = 'new.' || email
		WHERE customer_id = (SELECT min(customer_id) FROM digest_activity WHERE occurred_at >= '2026-09-28' AND occurred_at < '2026-10-05')
		RETURNING customer_id`).Scan(&victim); err != nil {
		t.Fatal(err)
	}
	changed := e.Run("run", "--week", "2026-W40")
	if changed.Code != 4 || changed.Count(t, "quarantined") != 1 || changed.Count(t, "sent") != 0 {
		t.Fatalf("rerun after an email change: exit %d, %v; want 4 with one quarantined, nothing sent\n%s", changed.Code, changed.Summary(t), changed.Stderr)
	}
	if st := e.Run("status", "--week", "2026-W40"); st.Code != 4 {
		t.Fatalf("status with a quarantined receipt: exit %d, want 4\n%s%s", st.Code, st.Stdout, st.Stderr)
	}
	key := strings.TrimSpace(e.MustRun("key", "--customer", victim, "--week", "2026-W40").Stdout)

	// The list says it was sent: the action is acknowledge, not release.
	list := e.MustRun("review", "list", "--week", "2026-W40")
	if line := lineWith(list.Stdout, key); !strings.Contains(line, "quarantined") || !strings.Contains(line, " sent ") {
		t.Fatalf("review list row of %s should say quarantined and sent:\n%s", key, list.Stdout)
	}
	var listed struct {
		Receipts []struct{ Key, State, Sent string }
	}
	if err := json.Unmarshal([]byte(e.MustRun("review", "list", "--json").Stdout), &listed); err != nil || len(listed.Receipts) != 1 || listed.Receipts[0].Sent != "sent" {
		t.Fatalf("review list --json: %+v (%v), want the one receipt with sent \"sent\"", listed, err)
	}
	if show := e.MustRun("review", "show", key); !strings.Contains(show.Stdout, "digest review acknowledge") {
		t.Fatalf("review show of a sent quarantined receipt should name acknowledge:\n%s", show.Stdout)
	}
	if rel := e.Run("review", "release", key, "--reason", "try"); rel.Code != 1 {
		t.Fatalf("release of a sent quarantined receipt: exit %d, want 1\n%s", rel.Code, rel.Stderr)
	}
	if ack := e.Run("review", "acknowledge", "--week", "2026-W40", "--state", "quarantined"); ack.Code != 2 || !strings.Contains(ack.Stderr, "--reason") {
		t.Fatalf("acknowledge without --reason: exit %d, want 2 naming --reason\n%s", ack.Code, ack.Stderr)
	}

	ack := e.MustRun("review", "acknowledge", "--week", "2026-W40", "--state", "quarantined",
		"--reason", "email changed after the send (OPS-19)", "--by", "alice")
	if !strings.Contains(ack.Stdout, "acknowledged 1 quarantined") {
		t.Fatalf("acknowledge said: %s", ack.Stdout)
	}
	show := e.MustRun("review", "show", key)
	for _, s := range []string{"acknowledged", `"alice"`, "email changed after the send (OPS-19)", "quarantined to acknowledged"} {
		if !strings.Contains(show.Stdout, s) {
			t.Errorf("review show after acknowledge lacks %q:\n%s", s, show.Stdout)
		}
	}
	if nothing := e.MustRun("review", "list"); !strings.Contains(nothing.Stdout, "nothing waits for review") {
		t.Errorf("review list after acknowledge:\n%s", nothing.Stdout)
	}
	st := e.Run("status", "--week", "2026-W40", "--json")
	var ws struct {
		NeedsReview int64            `json:"needs_review"`
		Receipts    map[string]int64 `json:"receipts"`
		Verdict     string           `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(st.Stdout), &ws); err != nil {
		t.Fatalf("status --json: %v\n%s", err, st.Stdout)
	}
	if st.Code == 4 || ws.NeedsReview != 0 || ws.Receipts["acknowledged"] != 1 || ws.Verdict != "complete" || st.Code != 0 {
		t.Fatalf("status after acknowledge: exit %d, %+v; want complete, nothing needing review\n%s", st.Code, ws, st.Stderr)
	}

	again := e.Run("run", "--week", "2026-W40")
	if again.Code != 0 || again.Count(t, "sent") != 0 || again.Count(t, "quarantined") != 0 {
		t.Fatalf("rerun after acknowledge: exit %d, %v; want 0, nothing sent or quarantined\n%s", again.Code, again.Summary(t), again.Stderr)
	}
	if n := e.MailpitCount(); n != sent {
		t.Fatalf("Mailpit holds %d messages after the reruns, want the %d of the first run", n, sent)
	}
	if rc := e.Receipts(); rc["acknowledged"] != 1 || rc["quarantined"] != 0 {
		t.Fatalf("receipts %v", rc)
	}
}

// lineWith returns the first line of s that contains sub.
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
