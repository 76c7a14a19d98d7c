package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/internal/e2etest"
)

// statusJSON is what "status --json" prints, the fields the tests read.
type statusJSON struct {
	Week        string           `json:"week"`
	Pinned      bool             `json:"pinned"`
	AsOf        *string          `json:"as_of"`
	Shard       string           `json:"shard"`
	Expected    *int             `json:"expected"`
	Receipts    map[string]int   `json:"receipts"`
	Settled     int              `json:"settled"`
	NeedsReview int              `json:"needs_review"`
	Remaining   *int             `json:"remaining"`
	Coverage    *float64         `json:"coverage"`
	Pruned      *bool            `json:"pruned"`
	LastRun     *json.RawMessage `json:"last_run"`
	Verdict     string           `json:"verdict"`
	ExitCode    int              `json:"exit_code"`
}

func statusOf(t *testing.T, e *e2etest.Env, wantCode int, args ...string) statusJSON {
	t.Helper()
	r := e.Run(append([]string{"status", "--week", "2026-W40", "--json"}, args...)...)
	if r.Code != wantCode {
		t.Fatalf("status --json %v: exit %d, want %d\n%s%s", args, r.Code, wantCode, r.Stdout, r.Stderr)
	}
	var s statusJSON
	if err := json.Unmarshal([]byte(r.Stdout), &s); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.Stdout)
	}
	if s.ExitCode != wantCode || s.Pruned == nil || s.Receipts == nil {
		t.Fatalf("status --json lacks fields or says exit %d: %s", s.ExitCode, r.Stdout)
	}
	return s
}

// sampleEnv is an Env on the embedded default (SQLite ledger, file
// outbox, no DIGEST_* settings) in a directory holding the examples.
func sampleEnv(t *testing.T) *e2etest.Env {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "examples"), os.DirFS(filepath.Join(e2etest.RepoRoot(), "examples"))); err != nil {
		t.Fatal(err)
	}
	e := e2etest.Bare(t, dir)
	e.Vars = []string{"DIGEST_DATABASE_URL=", "DIGEST_HMAC_KEYS=", "DIGEST_HMAC_KEYS_FILE=", "DIGEST_SMTP_URL="}
	return e
}

// wantLines fails unless out has a line matching each pattern.
func wantLines(t *testing.T, what, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(`(?m)` + p).MatchString(out) {
			t.Fatalf("%s lacks a line matching %s:\n%s", what, p, out)
		}
	}
}

// Issue 13 item 5: status tells a partial week from a complete one. Before
// any run the week is "not run yet" (exit 3); after an observe run and
// shard 0 of 2 it shows the expected digests against the settled ones and
// exits 3; after shard 1 of 2 it exits 0 at 100%; the last run's mode and
// exit code are shown each time.
func TestStatusTellsAPartialWeek(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(30, week40)
	n := len(want)

	before := e.Run("status", "--week", "2026-W40")
	if before.Code != 3 || !strings.Contains(before.Stdout, "not run yet") {
		t.Fatalf("status of an unpinned week: exit %d, want 3 and \"not run yet\"\n%s%s", before.Code, before.Stdout, before.Stderr)
	}
	if s := statusOf(t, e, 3); s.Pinned || s.Expected != nil || s.AsOf != nil || s.Verdict != "not_run_yet" || s.LastRun != nil {
		t.Fatalf("unpinned week: %+v", s)
	}

	// An observe run pins nothing (issue 19): the week is still not run,
	// and every customer to send is observed, not sent.
	e.MustRun("run", "--week", "2026-W40", "--mode", "observe")
	observed := e.Run("status", "--week", "2026-W40")
	wantLines(t, "status after an observe run", observed.Stdout,
		fmt.Sprintf(`^  observed_not_sent +%d$`, n), `^last run +\S+, observe, shard all, exit 0,`, `^verdict +not_run_yet$`,
		`^next +digest run --week 2026-W40$`)
	if observed.Code != 3 {
		t.Fatalf("status after an observe run: exit %d, want 3", observed.Code)
	}

	shard0 := e.MustRun("run", "--week", "2026-W40", "--shard", "0/2")
	sent0 := shard0.Count(t, "sent")
	if sent0 == 0 || sent0 == n {
		t.Fatalf("shard 0/2 sent %d of %d: the test needs a partial week", sent0, n)
	}
	partial := e.Run("status", "--week", "2026-W40")
	if partial.Code != 3 {
		t.Fatalf("status after shard 0/2: exit %d, want 3\n%s%s", partial.Code, partial.Stdout, partial.Stderr)
	}
	wantLines(t, "status after shard 0/2", partial.Stdout,
		`^sent +`+fmt.Sprint(sent0)+`$`, fmt.Sprintf(`^expected +%d weekly_activity v1 digests$`, n),
		fmt.Sprintf(`^settled +%d `, sent0), fmt.Sprintf(`^remaining +%d$`, n-sent0),
		`^as_of +\d{4}-\d\d-\d\dT`, `^pruned +no$`, `^last run +\S+, enforce, shard 0/2, exit 0,`)
	s := statusOf(t, e, 3)
	if *s.Expected != n || s.Settled != sent0 || *s.Remaining != n-sent0 || s.Verdict != "remaining" || *s.Coverage >= 1 || s.AsOf == nil {
		t.Fatalf("status --json after shard 0/2: %+v", s)
	}
	// The shard itself is complete: its digests are matched by key.
	if s := statusOf(t, e, 0, "--shard", "0/2"); *s.Expected != sent0 || s.Settled != sent0 || s.Shard != "0/2" {
		t.Fatalf("status --shard 0/2: %+v, want %d of %d", s, s.Settled, sent0)
	}
	statusOf(t, e, 3, "--shard", "1/2")

	e.MustRun("run", "--week", "2026-W40", "--shard", "1/2")
	done := e.Run("status", "--week", "2026-W40")
	if done.Code != 0 {
		t.Fatalf("status after both shards: exit %d, want 0\n%s%s", done.Code, done.Stdout, done.Stderr)
	}
	wantLines(t, "status after both shards", done.Stdout, `^coverage +100.0%$`, `^remaining +0$`, `^verdict +complete$`)
	if s := statusOf(t, e, 0); *s.Coverage != 1 || s.Settled != n || s.LastRun == nil {
		t.Fatalf("status --json of the complete week: %+v", s)
	}
	// A run given --send-empty would also send the customers without
	// activity: status given the same flag expects them.
	if s := statusOf(t, e, 3, "--send-empty"); *s.Expected <= n || *s.Remaining != *s.Expected-n {
		t.Fatalf("status --send-empty: %+v; want more than %d expected", s, n)
	}
	t.Logf("NUMBERS status: %d digests due; after shard 0/2 settled %d (exit 3), after 1/2 settled %d (exit 0)", n, sent0, n)
}

// A held receipt outranks what remains: status exits 4 and says so.
func TestStatusNeedsReview(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	e.Seed(20, week40)
	e.MustRun("run", "--week", "2026-W40", "--shard", "0/2")
	if _, err := e.Pool.Exec(context.Background(), `UPDATE receipts SET state = 'held'
		WHERE key = (SELECT min(key) FROM receipts)`); err != nil {
		t.Fatal(err)
	}
	r := e.Run("status", "--week", "2026-W40")
	if r.Code != 4 || !strings.Contains(r.Stderr, "need review") {
		t.Fatalf("status with a held receipt: exit %d, want 4\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	wantLines(t, "status with a held receipt", r.Stdout, `^held +1$`, `^needs review +1$`, `^verdict +needs_review$`)
	if s := statusOf(t, e, 4); s.NeedsReview != 1 || s.Verdict != "needs_review" {
		t.Fatalf("status --json with a held receipt: %+v", s)
	}
}

// docs/bad-input.md, "Status of a week": each row's exit code and message.
func TestStatusBadInput(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	e.Seed(10, week40)
	status := []string{"status", "--week", "2026-W40"}
	for _, row := range []struct {
		name string
		env  []string
		args []string
		code int
		msg  string
	}{
		{"no source", []string{"DIGEST_DATABASE_URL="}, status, 2, "no source: pass --snapshot FILE.jsonl"},
		{"shard out of range", nil, append(status, "--shard", "5/2"), 2, `index "5" must be 0 to 1`},
		{"shard without a keyring", []string{"DIGEST_HMAC_KEYS="}, append(status, "--shard", "0/2"), 2, "no HMAC keyring"},
		{"week not run yet", nil, status, 3, "not run yet"},
	} {
		r := e.RunEnv(row.env, row.args...)
		if r.Code != row.code || !r.Says(row.msg) {
			t.Errorf("%s: exit %d, want %d with %q\n%s%s", row.name, r.Code, row.code, row.msg, r.Stdout, r.Stderr)
		}
	}
}

// The issue's own case on the embedded default (SQLite ledger, file
// outbox, the example snapshot): after shard 0 of 2, 20 digests are due
// and 9 settled (exit 3); after shard 1 of 2 the week is complete.
func TestStatusOfASnapshotWeek(t *testing.T) {
	t.Parallel()
	e := sampleEnv(t)
	snap := []string{"--week", "2026-W48", "--snapshot", "examples/snapshot.jsonl"}
	e.MustRun(append([]string{"run", "--shard", "0/2"}, snap...)...)
	partial := e.Run(append([]string{"status"}, snap...)...)
	if partial.Code != 3 {
		t.Fatalf("status after shard 0/2: exit %d, want 3\n%s%s", partial.Code, partial.Stdout, partial.Stderr)
	}
	wantLines(t, "status after shard 0/2", partial.Stdout, `^expected +20 `, `^settled +9 `, `^remaining +11$`, `^coverage +45.0%$`)
	e.MustRun(append([]string{"run", "--shard", "1/2"}, snap...)...)
	done := e.Run(append([]string{"status"}, snap...)...)
	if done.Code != 0 {
		t.Fatalf("status after both shards: exit %d, want 0\n%s%s", done.Code, done.Stdout, done.Stderr)
	}
	wantLines(t, "status after both shards", done.Stdout, `^settled +20 `, `^coverage +100.0%$`, `^last run +\S+, enforce, shard 1/2, exit 0,`)
}
