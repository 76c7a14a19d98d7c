package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/postgres"
)

var errWeek = digest.ISOWeek{Year: 2026, Week: 32}

func errKey(t *testing.T) digest.Key {
	t.Helper()
	k, err := digest.ParseKey("k1:" + strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// wantClass checks that err left the store as a DriverError of class c.
func wantClass(t *testing.T, what string, err error, c ledger.ErrorClass) {
	t.Helper()
	var de *ledger.DriverError
	if err == nil || !errors.As(err, &de) || ledger.ErrorClassOf(err) != c {
		t.Fatalf("%s: %v (%T), want a %s DriverError", what, err, err, c)
	}
}

// TestErrorsLeaveClassified checks each class on a real server: a refused
// connection is transient, a lock that stays busy is a conflict, a missing
// table is fatal, and the ledger's own errors pass unwrapped.
func TestErrorsLeaveClassified(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	_, err := postgres.NewPool(ctx, "postgres://digest@127.0.0.1:1/test?connect_timeout=5")
	wantClass(t, "open a port nobody listens on", err, ledger.Transient)

	url := pgtest.Schema(t)
	bare, _ := postgres.OpenTest(t, url, postgres.Config{})
	_, err = bare.Counts(ctx, errWeek)
	wantClass(t, "count before migrating", err, ledger.Fatal)

	// lock_timeout (milliseconds) reaches the server as a run-time setting.
	withTimeout := url + " lock_timeout=200"
	if strings.Contains(url, "://") {
		withTimeout = url + "&lock_timeout=200"
	}
	s, pool := postgres.OpenTest(t, withTimeout, postgres.Config{})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Show(ctx, errKey(t))
	if !errors.Is(err, ledger.ErrNotFound) || ledger.ErrorClassOf(err) != ledger.Fatal {
		t.Fatalf("show an unknown key: %v, want ErrNotFound", err)
	}
	var de *ledger.DriverError
	if errors.As(err, &de) {
		t.Fatalf("show an unknown key: %v is wrapped as a driver error", err)
	}
	res, err := s.Claim(ctx, []digest.ClaimRequest{{Keys: []digest.Key{errKey(t)}, Fingerprint: "fp", Week: errWeek, RunID: "r", Lease: time.Minute}})
	if err != nil || res[0].Outcome != digest.OutcomeClaimed {
		t.Fatalf("claim: %v %v", res, err)
	}
	if errs, err := s.Finish(ctx, []digest.Finish{{Key: res[0].Key, Token: res[0].Token, State: digest.StateHeld}}); err != nil || errs[0] != nil {
		t.Fatalf("finish held: %v %v", errs, err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM receipts WHERE key = $1 FOR UPDATE`, string(res[0].Key)); err != nil {
		t.Fatal(err)
	}
	err = s.Release(ctx, res[0].Key, ledger.Action{By: "test", Reason: "lock held elsewhere"})
	wantClass(t, "release a row locked elsewhere", err, ledger.Conflict)
}
