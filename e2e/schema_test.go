package e2e

import (
	"context"
	"io/fs"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weeklydigest/digest/internal/e2etest"
	"github.com/weeklydigest/digest/migrations"
)

// Issue 23, schema version: a binary older than the ledger's schema (a
// newer binary migrated it) refuses to run, in words naming both versions
// and what to do, exit 2, nothing claimed or sent; status only warns;
// --allow-newer-schema runs it anyway, and sends each digest once.
func TestRunRefusesASchemaAheadOfTheBinary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := e2etest.NewEnv(t)
	want := e.Seed(30, week40)
	if _, err := e.Pool.Exec(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (999, true)`); err != nil {
		t.Fatal(err)
	}
	known := lastMigration(t)

	r := e.Run("run", "--week", "2026-W40")
	for _, words := range []string{"this binary is older than the ledger schema", "at migration 999", "knows migrations up to " + strconv.FormatInt(known, 10),
		"migrate --down-to " + strconv.FormatInt(known, 10), "--allow-newer-schema"} {
		if !strings.Contains(r.Stderr, words) {
			t.Errorf("run on a newer schema: stderr lacks %q", words)
		}
	}
	if r.Code != 2 {
		t.Fatalf("run on a newer schema: exit %d, want 2\n%s", r.Code, r.Stderr)
	}
	if n, rec := e.MailpitCount(), e.Receipts(); n != 0 || len(rec) != 0 {
		t.Fatalf("a refused run sent %d messages and left receipts %v; want none", n, rec)
	}

	st := e.Run("status", "--week", "2026-W40")
	if !strings.Contains(st.Stderr, "ledger schema ahead of this binary") || strings.Contains(st.Stdout+st.Stderr, "--allow-newer-schema") {
		t.Fatalf("status on a newer schema: exit %d; want a warning and the status\n%s%s", st.Code, st.Stdout, st.Stderr)
	}
	if st.Code != 3 || !strings.Contains(st.Stdout, "not run yet") {
		t.Fatalf("status on a newer schema: exit %d; want 3, not run yet\n%s%s", st.Code, st.Stdout, st.Stderr)
	}

	ok := e.Run("run", "--week", "2026-W40", "--allow-newer-schema")
	if ok.Code != 0 || !strings.Contains(ok.Stderr, "ledger schema ahead of this binary") {
		t.Fatalf("run --allow-newer-schema: exit %d, want 0 with the warning\n%s", ok.Code, ok.Stderr)
	}
	e.AssertExactlyOnce(want)
}

// Issue 23, schema version: "migrate --down-to" refuses, through the
// binary, while a run's claims are live (a run killed mid-send with a long
// lease), exit 1, the schema untouched.
func TestMigrateDownToRefusesWhileClaimsAreLive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := e2etest.NewEnv(t)
	e.Seed(100, week40)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := e.Command(runCtx, []string{"DIGEST_RATE=10", "DIGEST_BURST=1", "DIGEST_LEASE=10m"}, "run", "--week", "2026-W40")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e2etest.WaitFor(t, time.Minute, "live claims", func() bool { return e.Receipts()["claimed"] > 0 })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	known := lastMigration(t)
	r := e.Run("migrate", "--down-to", strconv.FormatInt(known-1, 10))
	if r.Code != 1 || !strings.Contains(r.Stderr, "claims are live") {
		t.Fatalf("migrate --down-to with live claims: exit %d, want 1 and \"claims are live\"\n%s", r.Code, r.Stderr)
	}
	var have int64
	if err := e.Pool.QueryRow(ctx, `SELECT max(version_id) FROM goose_db_version WHERE is_applied`).Scan(&have); err != nil || have != known {
		t.Fatalf("schema at %d (%v) after the refusal; want %d, untouched", have, err, known)
	}
}

// lastMigration is the number of the binary's last PostgreSQL migration.
func lastMigration(t *testing.T) int64 {
	t.Helper()
	names, err := fs.Glob(migrations.Postgres(), "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("migrations: %v %v", names, err)
	}
	n, err := strconv.ParseInt(strings.SplitN(names[len(names)-1], "_", 2)[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
