package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger/sqlite"
)

// Migration 00007 rebuilds receipts (SQLite cannot change a CHECK in
// place): down to 00005 and up again, every column of every receipt, in
// every state, is kept as it was.
func TestRebuildKeepsEveryReceipt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	now := time.Date(2026, 10, 6, 6, 0, 0, 0, time.UTC)
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path, Now: func() time.Time { return now }, LedgerNow: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	kr, err := digest.ParseKeyring("k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	if err != nil {
		t.Fatal(err)
	}
	w := digest.ISOWeek{Year: 2026, Week: 40}
	finishes := []digest.State{"", digest.StateSent, digest.StateRetryable, digest.StateFailed, digest.StateHeld, digest.StateQuarantined}
	for i, state := range finishes {
		keys := kr.Candidates(digest.Identity{Customer: fmt.Sprint("cust_", i), Week: w, Type: "t", Version: "v1"})
		res, err := s.Claim(ctx, []digest.ClaimRequest{{Keys: keys, Fingerprint: "fp1", Week: w, RunID: "run-1", Lease: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		c := res[0]
		if _, err := s.StartSending(ctx, []digest.Fence{{Key: c.Key, Token: c.Token}}); err != nil {
			t.Fatal(err)
		}
		switch state {
		case "":
			continue // claimed
		case digest.StateQuarantined:
			_, err = s.Claim(ctx, []digest.ClaimRequest{{Keys: keys, Fingerprint: "fp2", Week: w, RunID: "run-2", Lease: time.Minute}})
		default:
			_, err = s.Finish(ctx, []digest.Finish{{Key: c.Key, Token: c.Token, State: state, ProviderRef: "ref", Reason: "why",
				NextAttempt: now.Add(time.Hour), MaybeSent: true, RunID: "run-1"}})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	dump := func() string {
		t.Helper()
		var out string
		err := db.QueryRowContext(ctx, `SELECT group_concat(r, char(10)) FROM (SELECT concat_ws('|', quote(key), quote(key_id), quote(state), quote(previous_state), quote(fingerprint),
			quote(conflict_fingerprint), quote(attempts), quote(claim_token), quote(lease_expires_at),
			quote(send_started), quote(send_started_at), quote(maybe_sent), quote(next_attempt_at),
			quote(first_claimed_at), quote(last_attempt_at), quote(sent_at), quote(provider_ref),
			quote(last_error), quote(run_id), quote(iso_week), quote(updated_at), quote(first_run_id)) AS r FROM receipts ORDER BY key)`).Scan(&out)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := dump()
	if strings.Count(before, "\n") != len(finishes)-1 {
		t.Fatalf("receipts:\n%s", before)
	}
	// A roll-back waits for live claims (ErrLiveClaims): the claimed row
	// stays claimed, its lease over, as a crashed run leaves it.
	now = now.Add(2 * time.Minute)
	if err := s.MigrateDownTo(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if got := dump(); got != before {
		t.Fatalf("receipts after the down migration:\n%s\nwant\n%s", got, before)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if got := dump(); got != before {
		t.Fatalf("receipts after migrating up again:\n%s\nwant\n%s", got, before)
	}
	var indexes string
	if err := db.QueryRowContext(ctx, `SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'receipts' AND sql IS NOT NULL ORDER BY name)`).Scan(&indexes); err != nil {
		t.Fatal(err)
	}
	if indexes != "receipts_attention receipts_week_state" {
		t.Errorf("indexes of receipts after the rebuild: %q", indexes)
	}
}
