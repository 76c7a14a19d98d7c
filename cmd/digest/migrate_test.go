package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/ledger/postgres"
)

// Rolling back past migration 6 (receipts partitioned by week) takes
// "digest migrate --down-to 5" with this binary: the rows stay, receipts is
// one table again with the primary key the binaries before 6 claim on
// (ON CONFLICT (key)), and "digest migrate" partitions it again.
func TestMigrateDownToBeforePartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	vars := map[string]string{"DIGEST_DATABASE_URL": pgtest.Schema(t)}
	store := migratedStore(t, vars)
	week := digest.ISOWeek{Year: 2026, Week: 48}
	res, err := store.Claim(ctx, []digest.ClaimRequest{{Keys: []digest.Key{"k1:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}, Fingerprint: "fp", Week: week, RunID: "r1", Lease: time.Minute}})
	if err != nil || res[0].Outcome != digest.OutcomeClaimed {
		t.Fatalf("claim: %v %+v", err, res)
	}
	if errs, err := store.Finish(ctx, []digest.Finish{{Key: "k1:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", Token: res[0].Token, State: digest.StateSent, ProviderRef: "p", RunID: "r1", Week: week}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	store.Close()

	pool, err := pgxpool.New(ctx, vars["DIGEST_DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	shape := func() (kind string, version int64, state string) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT relkind::text FROM pg_class WHERE oid = 'receipts'::regclass`).Scan(&kind); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, `SELECT max(version_id) FROM goose_db_version`).Scan(&version); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, `SELECT state FROM receipts WHERE key = 'k1:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'`).Scan(&state); err != nil {
			t.Fatal(err)
		}
		return kind, version, state
	}
	if kind, _, _ := shape(); kind != "p" {
		t.Fatalf("receipts relkind %q after migrate, want a partitioned table", kind)
	}

	if code, _, stderr := runMain(t, vars, "migrate", "--down-to", "5"); code != ExitOK {
		t.Fatalf("migrate --down-to 5: exit %d\n%s", code, stderr)
	}
	if kind, version, state := shape(); kind != "r" || version != 5 || state != "sent" {
		t.Fatalf("after --down-to 5: relkind %q, version %d, receipt %q; want one table at 5 with the sent receipt", kind, version, state)
	}
	// What the binaries before migration 6 do to claim: a conflict on the
	// key alone.
	if _, err := pool.Exec(ctx, `
INSERT INTO receipts (key, key_id, state, fingerprint, attempts, claim_token, first_claimed_at, last_attempt_at, run_id, iso_week, updated_at)
VALUES ('k1:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'k1', 'claimed', 'fp', 1, 99, now(), now(), 'old', '2026-W48', now())
ON CONFLICT (key) DO NOTHING`); err != nil {
		t.Fatalf("an old binary's claim on the rolled-back table: %v", err)
	}

	if code, _, stderr := runMain(t, vars, "migrate"); code != ExitOK {
		t.Fatalf("migrate again: exit %d\n%s", code, stderr)
	}
	if kind, version, state := shape(); kind != "p" || version < 6 || state != "sent" {
		t.Fatalf("migrated again: relkind %q, version %d, receipt %q", kind, version, state)
	}
}

func TestMigrateDownToRefusesBadVersions(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l.db")
	for _, v := range []string{"0", "-1"} {
		code, _, stderr := runMain(t, nil, "migrate", "--ledger-path", path, "--down-to", v)
		if code != ExitUsage || !strings.Contains(stderr, "--down-to "+v) {
			t.Errorf("--down-to %s: exit %d, stderr %q; want %d naming the flag", v, code, stderr, ExitUsage)
		}
	}
	// SQLite rolls back and forth too.
	if code, _, stderr := runMain(t, nil, "migrate", "--ledger-path", path); code != ExitOK {
		t.Fatalf("migrate: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runMain(t, nil, "migrate", "--ledger-path", path, "--down-to", "1"); code != ExitOK {
		t.Fatalf("migrate --down-to 1: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runMain(t, nil, "migrate", "--ledger-path", path); code != ExitOK {
		t.Fatalf("migrate again: exit %d\n%s", code, stderr)
	}
}

// A binary refuses, in words, a ledger schema it cannot use: one behind
// it ("run digest migrate", exit 1: the Job's retry succeeds once the
// migration ran); one ahead of it (a newer binary's, which only adds) is
// used with a warning in the same words; and "migrate --down-to" refuses
// while a run's claims are live.
func TestSchemaVersionCheckedInWords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	vars := map[string]string{"DIGEST_DATABASE_URL": url, "DIGEST_HMAC_KEYS": testKeys}
	if code, _, stderr := runMain(t, vars, "migrate"); code != ExitOK {
		t.Fatalf("migrate: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runMain(t, vars, "review", "list"); code != ExitOK {
		t.Fatalf("review list on the current schema: exit %d\n%s", code, stderr)
	}
	store, pool := openPostgres(t, url)
	key := digest.Key("k1:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
	week := digest.WeekOf(time.Now(), time.UTC)
	res, err := store.Claim(ctx, []digest.ClaimRequest{{Keys: []digest.Key{key}, Fingerprint: "fp", Week: week, RunID: "r1", Lease: time.Hour}})
	if err != nil || res[0].Outcome != digest.OutcomeClaimed {
		t.Fatalf("claim: %v %+v", err, res)
	}
	code, _, stderr := runMain(t, vars, "migrate", "--down-to", "5")
	if code != ExitFailure || !strings.Contains(stderr, "claims are live") {
		t.Fatalf("migrate --down-to 5 with a live claim: exit %d, %q; want 1, refused", code, stderr)
	}
	if errs, err := store.Finish(ctx, []digest.Finish{{Key: key, Token: res[0].Token, State: digest.StateSent, ProviderRef: "p", RunID: "r1", Week: week}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if code, _, stderr := runMain(t, vars, "migrate", "--down-to", "5"); code != ExitOK {
		t.Fatalf("migrate --down-to 5 once the claim ended: exit %d\n%s", code, stderr)
	}
	code, _, stderr = runMain(t, vars, "review", "list")
	if code != ExitFailure || !strings.Contains(stderr, `at migration 5, this binary needs`) || !strings.Contains(stderr, `run \"digest migrate\"`) { // quoted in the JSON failure record
		t.Fatalf("review list on a schema behind: exit %d, %q; want 1 saying to run digest migrate", code, stderr)
	}
	if code, _, stderr := runMain(t, vars, "migrate"); code != ExitOK {
		t.Fatalf("migrate: exit %d\n%s", code, stderr)
	}
	// A newer binary's migration.
	if _, err := pool.Exec(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (999, true)`); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runMain(t, vars, "review", "list")
	if code != ExitOK || !strings.Contains(stderr, "this binary is older than the ledger schema") || !strings.Contains(stderr, "migration 999") {
		t.Fatalf("review list on a schema ahead: exit %d, %q; want 0 with a warning saying the binary is older", code, stderr)
	}
}

// migratedStore runs the binary's "digest migrate" on the schema of
// vars' DIGEST_DATABASE_URL and opens the PostgreSQL store on it, its pool
// closed when the test ends.
func migratedStore(t *testing.T, vars map[string]string) *postgres.Store {
	t.Helper()
	if code, _, stderr := runMain(t, vars, "migrate"); code != ExitOK {
		t.Fatalf("migrate: exit %d\n%s", code, stderr)
	}
	store, _ := openPostgres(t, vars["DIGEST_DATABASE_URL"])
	return store
}

// openPostgres opens the PostgreSQL store on a pool of its own on url, and
// returns the pool too, closed when the test ends.
func openPostgres(t *testing.T, url string) (*postgres.Store, *pgxpool.Pool) {
	t.Helper()
	pool, err := postgres.NewPool(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return postgres.New(pool, postgres.Config{}), pool
}
