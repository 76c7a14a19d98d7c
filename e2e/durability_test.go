package e2e

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the driver of the test's own connection

	"github.com/weeklydigest/digest/internal/e2etest"
)

// Issue 23, durability the job enforces, SQLite edition: nothing outside
// the binary can make the SQLite ledger unsafe. synchronous is a setting
// of each connection, and the job opens its own with FULL; the unsafe
// journal modes (OFF, MEMORY) are too, and the one a file keeps (WAL, or a
// rollback journal another tool switched it to) is safe with FULL; the
// path may not carry pragmas. So the refusal (ledger/sqlite's
// durabilitySettings, judged by TestDurabilitySettingsNameTheUnsafeOne) cannot be reached
// through the binary, and the check passes, naming what it found, on a
// file another tool left in rollback-journal mode.
func TestSQLiteLedgerDurabilityIsSetByTheJob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "examples"), os.DirFS(filepath.Join(e2etest.RepoRoot(), "examples"))); err != nil {
		t.Fatal(err)
	}
	e := e2etest.Bare(t, dir)
	e.Vars = []string{"DIGEST_HMAC_KEYS=" + e2etest.TestKeyring, "DIGEST_LEDGER_PATH=ledger.db", "DIGEST_OUTBOX_DIR=outbox", "DIGEST_LOG_LEVEL=info"}
	clean := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DIGEST_") {
			clean = append(clean, kv)
		}
	}
	run := func(args ...string) e2etest.Result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := e.Command(ctx, nil, args...)
		cmd.Env = append(clean, e.Vars...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run()
		return e2etest.Result{Code: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String()}
	}
	if r := run("migrate"); r.Code != 0 {
		t.Fatalf("migrate: exit %d\n%s", r.Code, r.Stderr)
	}
	path := filepath.Join(dir, "ledger.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode=DELETE").Scan(&mode); err != nil || mode != "delete" {
		t.Fatalf("journal_mode=DELETE: %q %v", mode, err)
	}
	db.Close()

	r := run("run", "--snapshot", "examples/snapshot.jsonl", "--week", "2026-W48")
	if r.Code != 0 || !strings.Contains(r.Stderr, `"msg":"ledger durability check passed"`) || !strings.Contains(r.Stderr, `"settings":"synchronous=FULL journal_mode=delete"`) {
		t.Fatalf("run on a file left in rollback-journal mode: exit %d; want 0 and the check passed with synchronous=FULL journal_mode=delete\n%s", r.Code, r.Stderr)
	}
	if r.Count(t, "sent") == 0 {
		t.Fatalf("nothing sent\n%s", r.Stderr)
	}
}
