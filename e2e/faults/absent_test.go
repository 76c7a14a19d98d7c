package faults

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/e2etest"
	"github.com/weeklydigest/digest/snapshot"
)

// Issue 23, claims end: a run killed mid-send leaves receipts claimed;
// their customers are then deleted from the source (the week's source no
// longer has them). No run reads them again, so before, they stayed
// claimed for ever. The next run ends each after its lease (failed with
// the reason, held when its send may have started), status counts none
// claimed, and nobody gets two messages.
func TestRunEndsClaimsOfCustomersDeletedFromTheSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := e2etest.NewEnv(t)
	want := e.Seed(200, week40)
	lease := []string{"DIGEST_LEASE=2s", "DIGEST_SMTP_TIMEOUT=500ms"}

	left, deleted := killLeavingClaims(t, e, 200, append([]string{"DIGEST_RATE=20", "DIGEST_BURST=1"}, lease...), "run", "--week", week40s)
	for _, table := range []string{"digest_activity", "digest_customers"} {
		if _, err := e.Pool.Exec(ctx, `DELETE FROM `+table+` WHERE customer_id = ANY($1)`, left); err != nil {
			t.Fatal(err)
		}
	}
	e2etest.WaitFor(t, time.Minute, "the killed run's leases to expire", func() bool {
		var live int
		_ = e.Pool.QueryRow(ctx, `SELECT count(*) FROM receipts WHERE state = 'claimed' AND lease_expires_at > now()`).Scan(&live)
		return live == 0
	})

	// A statement the killed run had sent may still have committed after
	// the kill: its receipt is no longer claimed, and ends as it was
	// recorded.
	for k := range deleted {
		var state string
		if err := e.Pool.QueryRow(ctx, `SELECT state FROM receipts WHERE key = $1`, k).Scan(&state); err != nil {
			t.Fatal(err)
		}
		switch state {
		case "claimed", "retryable":
		case "sent": // its one message went
			t.Logf("%s: sent by the killed run's last statement", k)
			delete(deleted, k)
		default:
			t.Logf("%s: %s by the killed run's last statement", k, state)
			delete(want, deleted[k])
			delete(deleted, k)
		}
	}

	rerun := e.RunEnv(lease, "run", "--week", week40s, "--deadline", "2m", "--lookup-delay", "1s", "--retry-backoff", "1s")
	if rerun.Code != 0 {
		t.Fatalf("rerun: exit %d\n%s", rerun.Code, rerun.Stderr)
	}
	if n := rerun.Count(t, "ended_claims"); n != len(deleted) {
		t.Fatalf("rerun ended %d claims, want the %d of deleted customers\n%s", n, len(deleted), rerun.Stderr)
	}
	held := 0
	for k, email := range deleted {
		var state, reason string
		if err := e.Pool.QueryRow(ctx, `SELECT state, coalesce(last_error, '') FROM receipts WHERE key = $1`, k).Scan(&state, &reason); err != nil {
			t.Fatal(err)
		}
		if reason != "customer not in the week's source after claim: not sent" || state != "failed" && state != "held" {
			t.Errorf("%s: %s %q; want failed or held, with the reason", k, state, reason)
		}
		if state == "held" {
			held++
		} else if n := countTo(t, e, email); n != 0 {
			t.Errorf("%s: ended failed, not sent, yet has %d messages", k, n)
		}
		delete(want, email)
	}
	d := e.Delivered(want)
	if d.Duplicates != 0 || d.Missing != 0 || d.Unexpected > held {
		t.Fatalf("delivery %+v (%d held may have gone); want no duplicate, every remaining customer once", d, held)
	}

	r := e.Run("status", "--week", week40s, "--json")
	s := struct {
		Receipts map[string]int `json:"receipts"`
	}{}
	if err := json.Unmarshal([]byte(r.Stdout), &s); err != nil {
		t.Fatalf("status --json: %v\n%s%s", err, r.Stdout, r.Stderr)
	}
	if s.Receipts["claimed"] != 0 || s.Receipts["failed"]+s.Receipts["held"] != len(deleted) || s.Receipts["sent"] != len(want) {
		t.Fatalf("status receipts %v; want none claimed, the %d ended failed or held, %d sent", s.Receipts, len(deleted), len(want))
	}
	t.Logf("NUMBERS absent: claims left by the kill %d (held %d), ended by the rerun %d, sent %d", len(deleted), held, rerun.Count(t, "ended_claims"), s.Receipts["sent"])
}

// killLeavingClaims starts digest with args on the week40 source of n
// customers, kills it once it holds claims and has sent some messages,
// and returns the customers of the claims it left and their keys' emails.
func killLeavingClaims(t *testing.T, e *e2etest.Env, n int, env []string, args ...string) (left []string, deleted map[string]string) {
	t.Helper()
	ctx := context.Background()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := e.Command(runCtx, env, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	claimed := func() (n int) {
		_ = e.Pool.QueryRow(ctx, `SELECT count(*) FROM receipts WHERE state = 'claimed'`).Scan(&n)
		return n
	}
	e2etest.WaitFor(t, time.Minute, "claims and some messages", func() bool { return claimed() >= 5 && e.MailpitCount() >= 5 })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	kr, err := digest.ParseKeyring(e2etest.TestKeyring)
	if err != nil {
		t.Fatal(err)
	}
	owner := map[digest.Key]digest.Customer{}
	for rec := range snapshot.Synthetic(n, week40, 1) {
		for _, k := range kr.Candidates(digest.Identity{Customer: rec.Customer.ID, Week: week40, Type: "weekly_activity", Version: "v1"}) {
			owner[k] = rec.Customer
		}
	}
	rows, err := e.Pool.Query(ctx, `SELECT key FROM receipts WHERE state = 'claimed'`)
	if err != nil {
		t.Fatal(err)
	}
	deleted = map[string]string{} // key → email
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		c, ok := owner[digest.Key(k)]
		if !ok {
			t.Fatalf("claimed key %s is no customer's", k)
		}
		left, deleted[k] = append(left, c.ID), c.Email
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(left) == 0 {
		t.Fatal("the killed run left no claim")
	}
	return left, deleted
}

// countTo counts Mailpit's messages to one address.
func countTo(t *testing.T, e *e2etest.Env, email string) int {
	t.Helper()
	got, err := e.Mailpit.Recipients(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range got {
		if a == email {
			n++
		}
	}
	return n
}
