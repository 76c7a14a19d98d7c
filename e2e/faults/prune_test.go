package faults

import (
	"context"
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
		if !strings.Contains(out, m) {
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

// Prune runs while a run of the week holds live claims and sends slowly:
// the short horizon is refused; receipts made to look old are kept, the
// claims because they are live and the sent ones because their week is
// being run. A rerun sends nothing. Then a prune takes some of the week's
// receipts, not all: the next run refuses, and each customer still has
// exactly one digest.
func TestPruneDuringARunKeepsLiveClaims(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(60, week40)
	bg := startRun(t, e, []string{"DIGEST_RATE=10", "DIGEST_BURST=1"}, "run", "--week", week40s)
	e2etest.WaitFor(t, time.Minute, "claims in flight and a first send", func() bool {
		return e.Receipts()["claimed"] > 0 && e.MailpitCount() > 0
	})
	wantExit(t, "prune --older-than 1s during a run", e.Run("prune", "--older-than", "1s"), 2, "shorter than the replay horizon")
	age(t, e, "true", false)
	during := e.Run("prune", "--older-than", "90d")
	wantExit(t, "prune during a run", during, 0, "pruned 0 receipts")
	if bg.exited() {
		t.Logf("the run ended before the prune: the prune did not overlap it")
	}
	if r := bg.wait(); r.Code != 0 {
		t.Fatalf("run: exit %d\n%s", r.Code, r.Stderr)
	}
	rerun := e.MustRun("run", "--week", week40s)
	if rerun.Count(t, "sent") != 0 || rerun.Count(t, "duplicates") != len(want) {
		t.Fatalf("rerun: %v", rerun.Summary(t))
	}
	e.AssertExactlyOnce(want)

	// Half the week's receipts grow old, and the week's last run too.
	age(t, e, "key < (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY key) FROM receipts)", true)
	part := e.MustRun("prune", "--older-than", "90d")
	if !strings.Contains(part.Stdout, week40s) || strings.Contains(part.Stdout, fmt.Sprintf("pruned %d ", len(want))) {
		t.Fatalf("partial prune: %s", part.Stdout)
	}
	wantExit(t, "run after a partial prune", e.Run("run", "--week", week40s), 2, "week "+week40s+" was pruned")
	e.AssertExactlyOnce(want)
	t.Logf("NUMBERS prune-during-run: receipts kept during the run; partial prune: %s", strings.TrimSpace(strings.SplitN(part.Stdout, "\n", 2)[0]))
}
