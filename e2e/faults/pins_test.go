package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/internal/e2etest"
)

// A second keyring: key id k2, secret the bytes 0x20…0x3f.
const keyring2 = "k2:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="

// receiptsByKeyID counts the ledger's receipts by key id.
func receiptsByKeyID(t *testing.T, e *e2etest.Env) map[string]int {
	t.Helper()
	rows, err := e.Pool.Query(context.Background(), `SELECT key_id, count(*) FROM receipts GROUP BY key_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var kid string
		var n int
		if err := rows.Scan(&kid, &n); err != nil {
			t.Fatal(err)
		}
		out[kid] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Issue 11, case 3: k1 → k2,k1 (nothing sent) → k2 alone used to send the
// whole week again, exit 0. The last run is refused before claiming,
// naming k1 and the number of the week's receipts under it.
func TestKeyringWithoutTheWeeksKeyIDIsRefused(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(60, week40)
	e.MustRun("run", "--week", week40s)
	rotated := e.RunEnv([]string{"DIGEST_HMAC_KEYS=" + keyring2 + "," + e2etest.TestKeyring}, "run", "--week", week40s)
	if rotated.Code != 0 || rotated.Count(t, "sent") != 0 || rotated.Count(t, "duplicates") != len(want) {
		t.Fatalf("rotated keyring k2,k1: exit %d, %v; want nothing sent\n%s", rotated.Code, rotated.Summary(t), rotated.Stderr)
	}
	r := e.RunEnv([]string{"DIGEST_HMAC_KEYS=" + keyring2}, "run", "--week", week40s)
	if msg := fmt.Sprintf("%d under key id k1", len(want)); r.Code != 2 || !strings.Contains(r.Stderr, msg) {
		t.Fatalf("keyring k2 alone: exit %d, want 2 with %q\n%s", r.Code, msg, r.Stderr)
	}
	e.AssertExactlyOnce(want)
	if got := receiptsByKeyID(t, e); len(got) != 1 || got["k1"] != len(want) {
		t.Fatalf("receipts by key id %v, want all %d under k1", got, len(want))
	}
	t.Logf("NUMBERS keyring k1 → k2,k1 → k2: %d customers, 0 duplicates, last run exit %d", len(want), r.Code)
}

// Runs of one week with different keyrings create every receipt under the
// key id the week's first run pinned, whichever comes first: never two
// receipts (and two messages) for one digest.
func TestDifferentKeyringsNeverMakeTwoReceipts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, first, second, pinned string }{
		{"k1 then k2,k1", e2etest.TestKeyring, keyring2 + "," + e2etest.TestKeyring, "k1"},
		{"k2 then k1,k2", keyring2, e2etest.TestKeyring + "," + keyring2, "k2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := e2etest.NewEnv(t)
			want := e.Seed(60, week40)
			// The first keyring sends one shard of three, the second the rest.
			first := e.RunEnv([]string{"DIGEST_HMAC_KEYS=" + tc.first}, "run", "--week", week40s, "--shard", "0/3")
			second := e.RunEnv([]string{"DIGEST_HMAC_KEYS=" + tc.second}, "run", "--week", week40s)
			if first.Code != 0 || second.Code != 0 || first.Count(t, "sent") == 0 ||
				first.Count(t, "sent")+second.Count(t, "sent") != len(want) {
				t.Fatalf("runs: exit %d and %d, sent %d and %d; want %d in all\n%s%s", first.Code, second.Code,
					first.Count(t, "sent"), second.Count(t, "sent"), len(want), first.Stderr, second.Stderr)
			}
			e.AssertExactlyOnce(want)
			if got := receiptsByKeyID(t, e); len(got) != 1 || got[tc.pinned] != len(want) {
				t.Fatalf("receipts by key id %v, want all %d under %s", got, len(want), tc.pinned)
			}
		})
	}
}

// Issue 11, case 4: a sent week rerun with another DIGEST_TZ used to
// quarantine every receipt (exit 4). It is refused up front, naming the
// pinned zone; nothing is quarantined and the right zone still works.
func TestZoneChangeOnASentWeekIsRefused(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(60, week40)
	e.MustRun("run", "--week", week40s)
	r := e.RunEnv([]string{"DIGEST_TZ=Europe/Berlin"}, "run", "--week", week40s)
	if r.Code != 2 || !strings.Contains(r.Stderr, "pinned to time zone UTC") || !strings.Contains(r.Stderr, "DIGEST_TZ=UTC") {
		t.Fatalf("rerun in Europe/Berlin: exit %d, want 2 naming UTC\n%s", r.Code, r.Stderr)
	}
	if got := e.Receipts(); len(got) != 1 || got["sent"] != len(want) {
		t.Fatalf("receipts by state %v, want %d sent, none quarantined", got, len(want))
	}
	again := e.MustRun("run", "--week", week40s)
	if again.Count(t, "duplicates") != len(want) || again.Count(t, "quarantined") != 0 {
		t.Fatalf("rerun in UTC: %v", again.Summary(t))
	}
	e.AssertExactlyOnce(want)
}

// A PostgreSQL ledger with no SMTP URL used to "send" into ./outbox and
// record the week as sent. It needs a mailer named on purpose: refused
// (exit 2) with neither, sent to files with DIGEST_OUTBOX_DIR or
// --outbox-dir.
func TestPostgresLedgerNeedsAnExplicitMailer(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(20, week40)
	e.Unset("DIGEST_SMTP_URL")
	r := e.Run("run", "--week", week40s)
	if r.Code != 2 || !strings.Contains(r.Stderr, "no mailer: a PostgreSQL ledger needs DIGEST_SMTP_URL") {
		t.Fatalf("no SMTP URL: exit %d, want 2\n%s", r.Code, r.Stderr)
	}
	if len(e.Receipts()) != 0 {
		t.Fatalf("the refused run left receipts: %v", e.Receipts())
	}
	if _, err := os.Stat(filepath.Join(e.Dir, "outbox")); !os.IsNotExist(err) {
		t.Fatalf("the refused run made ./outbox: %v", err)
	}
	// Named on purpose, by flag: the files are the delivery.
	dir := filepath.Join(t.TempDir(), "outbox")
	shard := e.Run("run", "--week", week40s, "--outbox-dir", dir, "--shard", "0/2")
	rest := e.RunEnv([]string{"DIGEST_OUTBOX_DIR=" + dir}, "run", "--week", week40s)
	if shard.Code != 0 || rest.Code != 0 || shard.Count(t, "sent")+rest.Count(t, "sent") != len(want) {
		t.Fatalf("explicit outbox: exit %d and %d\n%s%s", shard.Code, rest.Code, shard.Stderr, rest.Stderr)
	}
	files, err := os.ReadDir(dir)
	if err != nil || len(files) < len(want) {
		t.Fatalf("outbox holds %d entries (%v), want at least %d", len(files), err, len(want))
	}
	if n := e.MailpitCount(); n != 0 {
		t.Fatalf("Mailpit got %d messages", n)
	}
}

// The "nothing to send" line counts the week's sent receipts, not what one
// run (here one shard of three) met.
func TestNothingToSendCountsTheWeek(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(60, week40)
	e.MustRun("run", "--week", week40s)
	r := e.MustRun("run", "--week", week40s, "--shard", "1/3")
	if d := r.Count(t, "duplicates"); d == 0 || d == len(want) {
		t.Fatalf("the shard met %d of %d digests; the test needs a part", d, len(want))
	}
	if msg := fmt.Sprintf("nothing to send: all %d digests of %s were already sent", len(want), week40s); !strings.Contains(r.Stderr, msg) {
		t.Fatalf("want %q in\n%s", msg, r.Stderr)
	}
}

// A source without customers (not loaded yet) is refused before the week
// is pinned, unless an empty week is expected; loaded afterwards, the week
// is sent whole.
func TestEmptySourceIsRefusedUnlessAllowed(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(20, week40)
	ctx := context.Background()
	if _, err := e.Pool.Exec(ctx, `CREATE TABLE loaded AS SELECT * FROM digest_customers; DELETE FROM digest_customers`); err != nil {
		t.Fatal(err)
	}
	r := e.Run("run", "--week", week40s)
	if r.Code != 2 || !strings.Contains(r.Stderr, "no customers at all") || !strings.Contains(r.Stderr, "--allow-empty") {
		t.Fatalf("empty source: exit %d, want 2\n%s", r.Code, r.Stderr)
	}
	if other := e.Run("run", "--week", "2026-W41", "--allow-empty"); other.Code != 0 || other.Count(t, "digests") != 0 {
		t.Fatalf("--allow-empty: exit %d\n%s", other.Code, other.Stderr)
	}
	if _, err := e.Pool.Exec(ctx, `INSERT INTO digest_customers SELECT * FROM loaded`); err != nil {
		t.Fatal(err)
	}
	if sent := e.MustRun("run", "--week", week40s).Count(t, "sent"); sent != len(want) {
		t.Fatalf("after loading: sent %d, want %d", sent, len(want))
	}
	e.AssertExactlyOnce(want)
}

// review list says when --limit cut it short, and how many more there are.
func TestReviewListSaysWhenTruncated(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	e.Seed(40, week40)
	e.MustRun("run", "--week", week40s)
	// Five customers' sent activity changes: five quarantined receipts.
	if _, err := e.Pool.Exec(context.Background(), `
		UPDATE digest_activity SET amount_minor = amount_minor + 1
		WHERE ctid IN (SELECT DISTINCT ON (customer_id) ctid FROM digest_activity
		               WHERE occurred_at >= '2026-09-28' AND occurred_at < '2026-10-05'
		               ORDER BY customer_id LIMIT 5)`); err != nil {
		t.Fatal(err)
	}
	if r := e.Run("run", "--week", week40s); r.Code != 4 || r.Count(t, "quarantined") != 5 {
		t.Fatalf("altered run: exit %d, %v", r.Code, r.Summary(t))
	}
	short := e.MustRun("review", "list", "--limit", "2")
	if lines := strings.Count(short.Stdout, "quarantined"); !strings.Contains(short.Stdout, "3 more quarantined not listed") || lines != 3 {
		t.Fatalf("review list --limit 2:\n%s", short.Stdout)
	}
	if all := e.MustRun("review", "list"); strings.Contains(all.Stdout, "not listed") || strings.Count(all.Stdout, "quarantined") != 5 {
		t.Fatalf("review list:\n%s", all.Stdout)
	}
}
