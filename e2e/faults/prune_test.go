package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/internal/e2etest"
)

// age moves the ledger's clock back for the week's receipts matching
// where (and, with runs, for the record of when the week was last run):
// what 100 days of waiting would leave, without the wait.
func age(t *testing.T, e *e2etest.Env, where string, runs bool) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.Pool.Exec(ctx, `UPDATE receipts SET updated_at = updated_at - interval '100 days' WHERE `+where); err != nil {
		t.Fatal(err)
	}
	if !runs {
		return
	}
	if _, err := e.Pool.Exec(ctx, `UPDATE week_runs SET last_started_at = last_started_at - interval '100 days'`); err != nil {
		t.Fatal(err)
	}
}

func wantExit(t *testing.T, what string, r e2etest.Result, code int, msgs ...string) {
	t.Helper()
	out := r.Stdout + r.Stderr
	if r.Code != code {
		t.Fatalf("%s: exit %d, want %d\n%s", what, r.Code, code, out)
	}
	for _, m := range msgs {
		if !r.Says(m) {
			t.Fatalf("%s: output lacks %q\n%s", what, m, out)
		}
	}
}

// A sent week meets prune: absurd horizons are refused; an allowed one,
// once the receipts are old, deletes them and leaves a tombstone that
// status shows and that makes the next run of the week refuse, sending
// nothing, until the operator asks for the resend, which sends the week
// again, exactly as documented. The tombstone outlives the resend.
func TestPruneNeverResendsAWeekSilently(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(40, week40)
	if r := e.MustRun("run", "--week", week40s); r.Count(t, "sent") != len(want) {
		t.Fatalf("first run sent %d, want %d", r.Count(t, "sent"), len(want))
	}
	for _, h := range []string{"1s", "1h", "24h", "89d"} {
		wantExit(t, "prune --older-than "+h, e.Run("prune", "--older-than", h), 2, "shorter than the replay horizon 90d")
	}
	wantExit(t, "a replay horizon under the minimum", e.RunEnv([]string{"DIGEST_REPLAY_HORIZON=7d"}, "prune", "--older-than", "7d"),
		2, `DIGEST_REPLAY_HORIZON="7d": at least 14d`)
	if n := e.Receipts()["sent"]; n != len(want) {
		t.Fatalf("refused prunes left %d sent receipts of %d", n, len(want))
	}

	age(t, e, "true", true)
	dry := e.MustRun("prune", "--older-than", "90d", "--dry-run")
	wantExit(t, "dry run", dry, 0, fmt.Sprintf("would prune %d receipts older than 90d", len(want)), week40s)
	if st := e.Run("status", "--week", week40s); !regexp.MustCompile(`(?m)^pruned +no$`).MatchString(st.Stdout) {
		t.Fatalf("status after a dry run:\n%s", st.Stdout)
	}
	pruned := e.MustRun("prune", "--older-than", "90d")
	wantExit(t, "prune", pruned, 0, fmt.Sprintf("pruned %d receipts older than 90d", len(want)), week40s)
	status := e.Run("status", "--week", week40s)
	wantExit(t, "status", status, 0)
	for _, re := range []string{`(?m)^pruned +yes`, fmt.Sprintf(`(?m)^%s +weekly_activity +v1 +%d `, week40s, len(want))} {
		if !regexp.MustCompile(re).MatchString(status.Stdout) {
			t.Fatalf("status lacks %s:\n%s", re, status.Stdout)
		}
	}

	rerun := e.Run("run", "--week", week40s)
	wantExit(t, "rerun of the pruned week", rerun, 2, "week "+week40s+" was pruned", "--resend-pruned-week")
	if rc := e.Receipts(); len(rc) != 0 {
		t.Fatalf("refused run claimed: %v", rc)
	}
	e.AssertExactlyOnce(want)

	resend := e.Run("run", "--week", week40s, "--resend-pruned-week")
	wantExit(t, "resend", resend, 0, "sending a pruned week again")
	if n := resend.Count(t, "sent"); n != len(want) || e.MailpitCount() != 2*len(want) {
		t.Fatalf("resend sent %d (Mailpit %d), want the week again: %d", n, e.MailpitCount(), len(want))
	}
	wantExit(t, "run after the resend", e.Run("run", "--week", week40s), 2, "week "+week40s+" was pruned")
	t.Logf("NUMBERS prune: refused horizons 1s 1h 24h 89d; pruned %d; rerun exit %d sent 0; resend sent %d", len(want), rerun.Code, len(want))
}

// Prune runs while a run of the week holds live claims and sends slowly.
// The short horizon is refused. Receipts made to look old are kept while
// the week's run is recent; once that run looks old too, the sent receipts
// go (a tombstone) but the live claims stay, so the run finishes them
// without losing one. The rerun refuses the partly pruned week, and each
// customer has exactly one digest; the resend sends only what was pruned.
func TestPruneDuringARunKeepsLiveClaims(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(30, week40)
	// Every digest is claimed at once (one batch), then sent at 5/s: about
	// five seconds of live claims.
	bg := startRun(t, e, []string{"DIGEST_RATE=5", "DIGEST_BURST=1"}, "run", "--week", week40s)
	e2etest.WaitFor(t, time.Minute, "claims in flight and sent receipts", func() bool {
		if bg.exited() {
			r := bg.wait()
			t.Fatalf("the run ended (exit %d) before the prune could strike it; receipts %v\n%s", r.Code, e.Receipts(), r.Stderr)
		}
		rc := e.Receipts()
		return rc["claimed"] > 0 && rc["sent"] >= 3
	})
	wantExit(t, "prune --older-than 1s during a run", e.Run("prune", "--older-than", "1s"), 2, "shorter than the replay horizon")

	age(t, e, "true", false)
	wantExit(t, "prune of a week under run", e.Run("prune", "--older-than", "90d"), 0, "pruned 0 receipts")

	age(t, e, "true", true)
	during := e.MustRun("prune", "--older-than", "90d")
	live := e.Receipts()
	if live["claimed"] == 0 || strings.HasPrefix(during.Stdout, "pruned 0 ") || !strings.Contains(during.Stdout, week40s) {
		t.Fatalf("prune during the run: %q left %v; want sent receipts gone and the live claims kept (did the run end first?)", during.Stdout, live)
	}
	run := bg.wait()
	if run.Code != 0 || run.Count(t, "lost_claims") != 0 {
		t.Fatalf("run: exit %d, %d claims lost\n%s", run.Code, run.Count(t, "lost_claims"), run.Stderr)
	}
	wantExit(t, "rerun of the partly pruned week", e.Run("run", "--week", week40s), 2, "week "+week40s+" was pruned")
	e.AssertExactlyOnce(want)

	// The resend of a partly pruned week sends again only the digests
	// whose receipts went.
	var pruned int
	if _, err := fmt.Sscanf(during.Stdout, "pruned %d receipts", &pruned); err != nil {
		t.Fatal(err)
	}
	resend := e.MustRun("run", "--week", week40s, "--resend-pruned-week")
	if n := resend.Count(t, "sent"); n != pruned || e.MailpitCount() != len(want)+pruned {
		t.Fatalf("resend sent %d (Mailpit %d), want the %d pruned ones only (Mailpit %d)", n, e.MailpitCount(), pruned, len(want)+pruned)
	}
	t.Logf("NUMBERS prune-during-run: %s; %d claims live at the prune, kept; rerun refused; %d customers, one digest each",
		strings.TrimSpace(strings.SplitN(during.Stdout, "\n", 2)[0]), live["claimed"], len(want))
}

// Issue 23, claims end, in a sharded deployment: a run of one shard killed
// mid-send leaves receipts claimed, whose customers are then deleted from
// the source. A run of the shard again cannot end them (a receipt holds
// the key's HMAC, not its shard), so they stay claimed. Once the week is
// older than the horizon, digest prune ends each (failed with its reason,
// held when its send may have started) and says how many; status of the
// week counts none claimed, and nobody got two messages.
func TestPruneEndsClaimsAShardedRunLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := e2etest.NewEnv(t)
	want := e.Seed(200, week40)
	lease := []string{"DIGEST_LEASE=2s", "DIGEST_SMTP_TIMEOUT=500ms"}
	shard := []string{"run", "--week", week40s, "--shard", "0/2"}
	left, deleted := killLeavingClaims(t, e, 200, append([]string{"DIGEST_RATE=20", "DIGEST_BURST=1"}, lease...), shard...)
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
	stateOf := func(k string) (state, reason string) {
		t.Helper()
		if err := e.Pool.QueryRow(ctx, `SELECT state, coalesce(last_error, '') FROM receipts WHERE key = $1`, k).Scan(&state, &reason); err != nil {
			t.Fatal(err)
		}
		return state, reason
	}
	for k := range deleted { // a statement the killed run sent may have committed after the kill
		if st, _ := stateOf(k); st != "claimed" && st != "retryable" {
			t.Logf("%s: %s by the killed run's last statement", k, st)
			delete(deleted, k)
		}
	}

	rerun := e.RunEnv(lease, append(shard, "--deadline", "2m", "--lookup-delay", "1s", "--retry-backoff", "1s")...)
	if rerun.Code != 0 || rerun.Count(t, "ended_claims") != 0 {
		t.Fatalf("rerun of the shard: exit %d, ended %d claims; want 0 and none (a sharded run cannot tell them absent)\n%s",
			rerun.Code, rerun.Count(t, "ended_claims"), rerun.Stderr)
	}
	for k := range deleted {
		if st, _ := stateOf(k); st != "claimed" && st != "retryable" {
			t.Fatalf("%s: %s after the sharded rerun; want it still unfinished", k, st)
		}
	}

	age(t, e, "true", true)
	dry := e.MustRun("prune", "--older-than", "90d", "--dry-run")
	wantExit(t, "dry run", dry, 0, fmt.Sprintf("would end %d claims no run finished", len(deleted)))
	pruned := e.MustRun("prune", "--older-than", "90d")
	wantExit(t, "prune", pruned, 0, fmt.Sprintf("ended %d claims no run finished older than 90d", len(deleted)))
	held := 0
	for k, email := range deleted {
		st, reason := stateOf(k)
		if reason != "claim ended by prune: no run finished it" || st != "failed" && st != "held" {
			t.Errorf("%s: %s %q; want failed or held, with the prune's reason", k, st, reason)
		}
		if st == "held" {
			held++
		} else if n := countTo(t, e, email); n != 0 {
			t.Errorf("%s: ended failed, not sent, yet has %d messages", k, n)
		}
	}
	if d := e.Delivered(want); d.Duplicates != 0 {
		t.Fatalf("delivery %+v; want no duplicate", d)
	}

	r := e.Run("status", "--week", week40s, "--json")
	s := struct {
		Receipts map[string]int `json:"receipts"`
	}{}
	if err := json.Unmarshal([]byte(r.Stdout), &s); err != nil {
		t.Fatalf("status --json: %v\n%s%s", err, r.Stdout, r.Stderr)
	}
	if s.Receipts["claimed"] != 0 || s.Receipts["retryable"] != 0 || s.Receipts["failed"]+s.Receipts["held"] != len(deleted) {
		t.Fatalf("status receipts %v; want none claimed or retryable, the %d ended failed or held kept", s.Receipts, len(deleted))
	}
	t.Logf("NUMBERS prune-ends-claims: left by the killed shard %d, ended by prune %d (held %d); %s",
		len(deleted), len(deleted), held, strings.TrimSpace(pruned.Stdout))
}
