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
)

// A past week: every seeded row is recorded before the snapshot is pinned.
var week40 = digest.ISOWeek{Year: 2026, Week: 40}

// A seeded week is sent completely, once; the same week again sends nothing.
func TestWeekSentOnceThenAllDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	want := e.seed(150, week40)

	first := e.mustRun("run", "--week", "2026-W40")
	e.assertExactlyOnce(want)
	if got := first.count(t, "sent"); got != len(want) {
		t.Fatalf("first run sent %d, want %d", got, len(want))
	}
	if got := first.count(t, "skipped"); got != 150-len(want) {
		t.Fatalf("first run skipped %d, want the %d customers without activity", got, 150-len(want))
	}

	second := e.mustRun("run", "--week", "2026-W40")
	e.assertExactlyOnce(want)
	if s, d := second.count(t, "sent"), second.count(t, "duplicates"); s != 0 || d != len(want) {
		t.Fatalf("second run: sent %d, duplicates %d; want 0 and %d", s, d, len(want))
	}
	if !strings.Contains(second.stderr, "nothing to send") {
		t.Fatalf("second run must say it sent nothing:\n%s", second.stderr)
	}
	if r := e.receipts(); r["sent"] != len(want) || len(r) != 1 {
		t.Fatalf("receipts by state = %v, want %d sent", r, len(want))
	}
}

// A run killed with SIGKILL in the middle, then run again with a short
// lease, still gives every customer exactly one message.
func TestKilledRunThenRerunSendsExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	want := e.seed(400, week40)
	slow := []string{"DIGEST_RATE=200", "DIGEST_BURST=1", "DIGEST_LEASE=2s"}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := e.command(ctx, slow, "run", "--week", "2026-W40")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "some messages to arrive", func() bool {
		n, err := e.mailpit.Count(context.Background())
		return err == nil && n >= 60
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	rerun := e.runEnv([]string{"DIGEST_LEASE=2s"}, "run", "--week", "2026-W40", "--deadline", "2m")
	if rerun.code != 0 {
		t.Fatalf("rerun exit %d\n%s", rerun.code, rerun.stderr)
	}
	e.assertExactlyOnce(want)
	if r := e.receipts(); r["sent"] != len(want) {
		t.Fatalf("receipts by state = %v, want all %d sent", r, len(want))
	}
}

// SIGTERM stops claiming, lets sends under way finish and be recorded, and
// exits 3; the next run completes without review.
func TestSIGTERMExitsIncompleteAndNextRunCompletes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	want := e.seed(300, week40)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := e.command(ctx, []string{"DIGEST_RATE=150", "DIGEST_BURST=1"}, "run", "--week", "2026-W40")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "some messages to arrive", func() bool {
		n, err := e.mailpit.Count(context.Background())
		return err == nil && n >= 30
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 3 {
		t.Fatalf("after SIGTERM: exit %d (%v), want 3\n%s", code, err, stderr.String())
	}
	r := e.receipts()
	if r["held"] != 0 || r["claimed"] != 0 {
		t.Fatalf("after SIGTERM receipts = %v: nothing may stay claimed or be held", r)
	}

	// No lease to wait for: released claims are due at once.
	next := e.mustRun("run", "--week", "2026-W40", "--deadline", "0")
	e.assertExactlyOnce(want)
	if next.count(t, "reconciled") != 0 || next.count(t, "held") != 0 {
		t.Fatalf("the run after SIGTERM needed look-ups or review: %v", next.summary(t))
	}
}

// Two runs of one week at once, and two shards side by side: exactly once.
func TestParallelRunsAndShardsSendExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	want := e.seed(300, week40)

	type out struct {
		r   result
		err error
	}
	runs := [][]string{
		{"run", "--week", "2026-W40"},
		{"run", "--week", "2026-W40"},
		{"run", "--week", "2026-W40", "--shard", "0/2"},
		{"run", "--week", "2026-W40", "--shard", "1/2"},
	}
	done := make(chan result, len(runs))
	for _, args := range runs {
		go func() { done <- e.run(append(args, "--deadline", "1m")...) }()
	}
	for range runs {
		r := <-done
		if r.code != 0 {
			t.Errorf("a parallel run exited %d\n%s", r.code, r.stderr)
		}
	}
	e.assertExactlyOnce(want)
}

// A row recorded after the snapshot's as_of changes nothing; a row altered
// inside the snapshot quarantines its key and sends nothing for it.
func TestLateRowIgnoredAlteredRowQuarantined(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	want := e.seed(40, week40)
	e.mustRun("run", "--week", "2026-W40")
	ctx := context.Background()

	if _, err := e.pool.Exec(ctx, `INSERT INTO digest_activity VALUES ('cust_0000001', '2026-10-01T10:00:00Z', now() + interval '1 hour', 'fee', -100, 'EUR', 'late fee')`); err != nil {
		t.Fatal(err)
	}
	late := e.mustRun("run", "--week", "2026-W40")
	if late.count(t, "sent") != 0 || late.count(t, "quarantined") != 0 || late.count(t, "duplicates") != len(want) {
		t.Fatalf("a late row changed the week: %v", late.summary(t))
	}

	var victim string
	if err := e.pool.QueryRow(ctx, `
		UPDATE digest_activity SET amount_minor = amount_minor + 1
		WHERE ctid = (SELECT ctid FROM digest_activity WHERE occurred_at >= '2026-09-28' AND occurred_at < '2026-10-05' AND description <> 'late fee' ORDER BY customer_id LIMIT 1)
		RETURNING customer_id`).Scan(&victim); err != nil {
		t.Fatal(err)
	}
	altered := e.run("run", "--week", "2026-W40")
	if altered.code != 4 {
		t.Fatalf("altered snapshot: exit %d, want 4 (review)\n%s", altered.code, altered.stderr)
	}
	if altered.count(t, "quarantined") != 1 || altered.count(t, "sent") != 0 {
		t.Fatalf("altered snapshot: %v, want one quarantined and nothing sent", altered.summary(t))
	}
	e.assertExactlyOnce(want)
	key := strings.TrimSpace(e.mustRun("key", "--customer", victim, "--week", "2026-W40").stdout)
	list := e.mustRun("review", "list")
	if !strings.Contains(list.stdout, key) || !strings.Contains(list.stdout, "quarantined") {
		t.Fatalf("review list does not show the quarantined key %s:\n%s", key, list.stdout)
	}
}

// Observe mode sends nothing and writes no receipt; a repeated observation
// is counted in the duplicate-age report.
func TestObserveModeSendsNothingAndCountsRepeats(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	want := e.seed(60, week40)

	first := e.mustRun("run", "--week", "2026-W40", "--mode", "observe")
	if first.count(t, "observed") != len(want) {
		t.Fatalf("observed %d, want %d", first.count(t, "observed"), len(want))
	}
	second := e.mustRun("run", "--week", "2026-W40", "--mode", "observe")
	if got := second.count(t, "repeat_under_5m"); got != len(want) {
		t.Fatalf("repeats under 5 minutes = %d, want %d: %v", got, len(want), second.summary(t))
	}
	if n, _ := e.mailpit.Count(context.Background()); n != 0 {
		t.Fatalf("observe mode sent %d messages", n)
	}
	if r := e.receipts(); len(r) != 0 {
		t.Fatalf("observe mode wrote receipts: %v", r)
	}
	status := e.mustRun("status", "--week", "2026-W40")
	if !strings.Contains(status.stdout, "observations") {
		t.Fatalf("status does not report observations:\n%s", status.stdout)
	}
	// A cohort run enforces for some and observes the rest.
	cohort := e.mustRun("run", "--week", "2026-W40", "--cohort", "50")
	sent, observed := cohort.count(t, "sent"), cohort.count(t, "observed")
	if sent == 0 || observed == 0 || sent+observed != len(want) {
		t.Fatalf("cohort 50%%: sent %d and observed %d of %d", sent, observed, len(want))
	}
}

// The README's first command, on the embedded default (SQLite ledger and
// file outbox, no servers, no keyring configured), twice.
func TestEmbeddedDefaultQuickStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "examples"), os.DirFS(filepath.Join(repoRoot(t), "examples"))); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: dir}
	var clean []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DIGEST_") {
			clean = append(clean, kv)
		}
	}
	runIt := func() result {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := e.command(ctx, nil, "run", "--snapshot", "examples/snapshot.jsonl", "--week", "2026-W48")
		cmd.Env = clean
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run()
		return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	}
	first := runIt()
	if first.code != 0 {
		t.Fatalf("exit %d\n%s", first.code, first.stderr)
	}
	if !strings.Contains(first.stderr, "created a local one") {
		t.Fatalf("the embedded default must warn that it created a keyring:\n%s", first.stderr)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "outbox", "*.eml"))
	if sent := first.count(t, "sent"); sent == 0 || sent != len(files) {
		t.Fatalf("sent %d, outbox holds %d files", sent, len(files))
	}
	second := runIt()
	if second.code != 0 || second.count(t, "sent") != 0 || !strings.Contains(second.stderr, "nothing to send") {
		t.Fatalf("second run: exit %d, sent %d; want 0, 0 and a message saying so\n%s", second.code, second.count(t, "sent"), second.stderr)
	}
	if strings.Contains(second.stderr, "created a local one") {
		t.Fatal("the local keyring must be created once")
	}
	again, _ := filepath.Glob(filepath.Join(dir, "outbox", "*.eml"))
	if len(again) != len(files) {
		t.Fatalf("outbox went from %d to %d files", len(files), len(again))
	}
}
