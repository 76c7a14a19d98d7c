package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/e2etest"
)

// A past week: every seeded row is recorded before the snapshot is pinned.
var week40 = digest.ISOWeek{Year: 2026, Week: 40}

// A seeded week is sent completely, once; the same week again sends nothing.
func TestWeekSentOnceThenAllDuplicates(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(150, week40)

	first := e.MustRun("run", "--week", "2026-W40")
	e.AssertExactlyOnce(want)
	if got := first.Count(t, "sent"); got != len(want) {
		t.Fatalf("first run sent %d, want %d", got, len(want))
	}
	if got := first.Count(t, "skipped"); got != 150-len(want) {
		t.Fatalf("first run skipped %d, want the %d customers without activity", got, 150-len(want))
	}

	second := e.MustRun("run", "--week", "2026-W40")
	e.AssertExactlyOnce(want)
	if s, d := second.Count(t, "sent"), second.Count(t, "duplicates"); s != 0 || d != len(want) {
		t.Fatalf("second run: sent %d, duplicates %d; want 0 and %d", s, d, len(want))
	}
	if !strings.Contains(second.Stderr, "nothing to send") {
		t.Fatalf("second run must say it sent nothing:\n%s", second.Stderr)
	}
	if r := e.Receipts(); r["sent"] != len(want) || len(r) != 1 {
		t.Fatalf("receipts by state = %v, want %d sent", r, len(want))
	}
}

// A run killed with SIGKILL in the middle, then run again with a short
// lease, still gives every customer exactly one message.
func TestKilledRunThenRerunSendsExactlyOnce(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(400, week40)
	slow := []string{"DIGEST_RATE=200", "DIGEST_BURST=1", "DIGEST_LEASE=2s", "DIGEST_SMTP_TIMEOUT=500ms"}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := e.Command(ctx, slow, "run", "--week", "2026-W40")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e2etest.WaitFor(t, time.Minute, "some messages to arrive", func() bool {
		n, err := e.Mailpit.Count(context.Background())
		return err == nil && n >= 60
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	rerun := e.RunEnv([]string{"DIGEST_LEASE=2s", "DIGEST_SMTP_TIMEOUT=500ms"}, "run", "--week", "2026-W40", "--deadline", "2m", "--lookup-delay", "1s", "--retry-backoff", "1s")
	if rerun.Code != 0 {
		t.Fatalf("rerun exit %d\n%s", rerun.Code, rerun.Stderr)
	}
	e.AssertExactlyOnce(want)
	if r := e.Receipts(); r["sent"] != len(want) {
		t.Fatalf("receipts by state = %v, want all %d sent", r, len(want))
	}
}

// SIGTERM stops claiming, lets sends under way finish and be recorded, and
// exits 3; the next run completes without review.
func TestSIGTERMExitsIncompleteAndNextRunCompletes(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(300, week40)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := e.Command(ctx, []string{"DIGEST_RATE=150", "DIGEST_BURST=1"}, "run", "--week", "2026-W40")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e2etest.WaitFor(t, time.Minute, "some messages to arrive", func() bool {
		n, err := e.Mailpit.Count(context.Background())
		return err == nil && n >= 30
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 3 {
		t.Fatalf("after SIGTERM: exit %d (%v), want 3\n%s", code, err, stderr.String())
	}
	r := e.Receipts()
	if r["held"] != 0 || r["claimed"] != 0 {
		t.Fatalf("after SIGTERM receipts = %v: nothing may stay claimed or be held", r)
	}

	// No lease to wait for: released claims are due at once.
	next := e.MustRun("run", "--week", "2026-W40", "--deadline", "0")
	e.AssertExactlyOnce(want)
	if next.Count(t, "reconciled") != 0 || next.Count(t, "held") != 0 {
		t.Fatalf("the run after SIGTERM needed look-ups or review: %v", next.Summary(t))
	}
}

// Two runs of one week at once, and two shards side by side: exactly once.
func TestParallelRunsAndShardsSendExactlyOnce(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(300, week40)

	runs := [][]string{
		{"run", "--week", "2026-W40"},
		{"run", "--week", "2026-W40"},
		{"run", "--week", "2026-W40", "--shard", "0/2"},
		{"run", "--week", "2026-W40", "--shard", "1/2"},
	}
	done := make(chan e2etest.Result, len(runs))
	for _, args := range runs {
		go func() { done <- e.Run(append(args, "--deadline", "1m")...) }()
	}
	for range runs {
		r := <-done
		if r.Code != 0 {
			t.Errorf("a parallel run exited %d\n%s", r.Code, r.Stderr)
		}
	}
	e.AssertExactlyOnce(want)
}

// A row recorded after the snapshot's as_of changes nothing; a row altered
// inside the snapshot quarantines its key and sends nothing for it.
func TestLateRowIgnoredAlteredRowQuarantined(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(40, week40)
	e.MustRun("run", "--week", "2026-W40")
	ctx := context.Background()

	if _, err := e.Pool.Exec(ctx, `INSERT INTO digest_activity VALUES ('cust_0000001', '2026-10-01T10:00:00Z', now() + interval '1 hour', 'fee', -100, 'EUR', 'late fee')`); err != nil {
		t.Fatal(err)
	}
	late := e.MustRun("run", "--week", "2026-W40")
	if late.Count(t, "sent") != 0 || late.Count(t, "quarantined") != 0 || late.Count(t, "duplicates") != len(want) {
		t.Fatalf("a late row changed the week: %v", late.Summary(t))
	}

	var victim string
	if err := e.Pool.QueryRow(ctx, `
		UPDATE digest_activity SET amount_minor = amount_minor + 1
		WHERE ctid = (SELECT ctid FROM digest_activity WHERE occurred_at >= '2026-09-28' AND occurred_at < '2026-10-05' AND description <> 'late fee' ORDER BY customer_id LIMIT 1)
		RETURNING customer_id`).Scan(&victim); err != nil {
		t.Fatal(err)
	}
	altered := e.Run("run", "--week", "2026-W40")
	if altered.Code != 4 {
		t.Fatalf("altered snapshot: exit %d, want 4 (review)\n%s", altered.Code, altered.Stderr)
	}
	if altered.Count(t, "quarantined") != 1 || altered.Count(t, "sent") != 0 {
		t.Fatalf("altered snapshot: %v, want one quarantined and nothing sent", altered.Summary(t))
	}
	e.AssertExactlyOnce(want)
	key := strings.TrimSpace(e.MustRun("key", "--customer", victim, "--week", "2026-W40").Stdout)
	list := e.MustRun("review", "list")
	if !strings.Contains(list.Stdout, key) || !strings.Contains(list.Stdout, "quarantined") {
		t.Fatalf("review list does not show the quarantined key %s:\n%s", key, list.Stdout)
	}
}

// Observe mode sends nothing and writes no receipt; a repeated observation
// is counted in the duplicate-age report.
func TestObserveModeSendsNothingAndCountsRepeats(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(60, week40)

	first := e.MustRun("run", "--week", "2026-W40", "--mode", "observe")
	if first.Count(t, "observed") != len(want) {
		t.Fatalf("observed %d, want %d", first.Count(t, "observed"), len(want))
	}
	second := e.MustRun("run", "--week", "2026-W40", "--mode", "observe")
	if got := second.Count(t, "repeat_under_5m"); got != len(want) {
		t.Fatalf("repeats under 5 minutes = %d, want %d: %v", got, len(want), second.Summary(t))
	}
	if n, _ := e.Mailpit.Count(context.Background()); n != 0 {
		t.Fatalf("observe mode sent %d messages", n)
	}
	if r := e.Receipts(); len(r) != 0 {
		t.Fatalf("observe mode wrote receipts: %v", r)
	}
	// An observe run settles nothing: status says the week remains (exit 3).
	status := e.Run("status", "--week", "2026-W40")
	if status.Code != 3 || !strings.Contains(status.Stdout, "observations") {
		t.Fatalf("status does not report observations, or exit %d (want 3):\n%s", status.Code, status.Stdout)
	}
	// A cohort run enforces for some and observes the rest.
	cohort := e.MustRun("run", "--week", "2026-W40", "--cohort", "50")
	sent, observed := cohort.Count(t, "sent"), cohort.Count(t, "observed")
	if sent == 0 || observed == 0 || sent+observed != len(want) {
		t.Fatalf("cohort 50%%: sent %d and observed %d of %d", sent, observed, len(want))
	}
}

// The README's first command, on the embedded default (SQLite ledger and
// file outbox, no servers, no keyring configured), twice.
func TestEmbeddedDefaultQuickStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "examples"), os.DirFS(filepath.Join(e2etest.RepoRoot(), "examples"))); err != nil {
		t.Fatal(err)
	}
	e := e2etest.Bare(t, dir)
	var clean []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DIGEST_") {
			clean = append(clean, kv)
		}
	}
	runIt := func() e2etest.Result {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := e.Command(ctx, nil, "run", "--snapshot", "examples/snapshot.jsonl", "--week", "2026-W48")
		cmd.Env = clean
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run()
		return e2etest.Result{Code: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String()}
	}
	first := runIt()
	if first.Code != 0 {
		t.Fatalf("exit %d\n%s", first.Code, first.Stderr)
	}
	if !strings.Contains(first.Stderr, "created a local one") {
		t.Fatalf("the embedded default must warn that it created a keyring:\n%s", first.Stderr)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "outbox", "*.eml"))
	if sent := first.Count(t, "sent"); sent == 0 || sent != len(files) {
		t.Fatalf("sent %d, outbox holds %d files", sent, len(files))
	}
	second := runIt()
	if second.Code != 0 || second.Count(t, "sent") != 0 || !strings.Contains(second.Stderr, "nothing to send") {
		t.Fatalf("second run: exit %d, sent %d; want 0, 0 and a message saying so\n%s", second.Code, second.Count(t, "sent"), second.Stderr)
	}
	if strings.Contains(second.Stderr, "created a local one") {
		t.Fatal("the local keyring must be created once")
	}
	again, _ := filepath.Glob(filepath.Join(dir, "outbox", "*.eml"))
	if len(again) != len(files) {
		t.Fatalf("outbox went from %d to %d files", len(files), len(again))
	}
}
