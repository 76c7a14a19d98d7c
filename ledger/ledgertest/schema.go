package ledgertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weeklydigest/digest/ledger"
)

// testSchemaVersion: a migrated store is at the version the binary needs;
// one never migrated is behind, in words that say to run digest migrate;
// one rolled back is behind too.
func testSchemaVersion(t *testing.T, d Driver) {
	ctx := context.Background()
	cfg := d.Fresh(t)
	s := open(t, d, cfg, newClock())
	sc, err := s.Schema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Err(); sc.Have != 0 || sc.Want < 5 || !errors.Is(err, ledger.ErrSchemaBehind) {
		t.Fatalf("never migrated: %+v, %v; want 0 behind the binary's", sc, err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if sc, err = s.Schema(ctx); err != nil || sc.Have != sc.Want || sc.Err() != nil {
		t.Fatalf("migrated: %+v, %v, %v; want the binary's version", sc, err, sc.Err())
	}
	if err := s.MigrateDownTo(ctx, sc.Want-1); err != nil {
		t.Fatal(err)
	}
	// One migration behind: the numbers are contiguous, so Want-1.
	if sc, err = s.Schema(ctx); err != nil || sc.Have != sc.Want-1 || !errors.Is(sc.Err(), ledger.ErrSchemaBehind) {
		t.Fatalf("rolled back: %+v, %v; want one behind", sc, err)
	}
	if got := (ledger.Schema{Have: 9, Want: 5}).Err(); !errors.Is(got, ledger.ErrSchemaAhead) {
		t.Fatalf("a schema ahead: %v", got)
	}
}

// testDownToRefusesLiveClaims: migrate --down-to refuses while a receipt
// is claimed under a lease that has not expired, and proceeds once it has.
func testDownToRefusesLiveClaims(t *testing.T, d Driver) {
	ctx := context.Background()
	s, clk, _ := fresh(t, d)
	sc, err := s.Schema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, req(keys(t, "cust_live"), "fp"))
	if err := s.MigrateDownTo(ctx, sc.Want-1); !errors.Is(err, ledger.ErrLiveClaims) {
		t.Fatalf("down-to with a live claim: %v; want ErrLiveClaims", err)
	}
	if sc, err := s.Schema(ctx); err != nil || sc.Err() != nil {
		t.Fatalf("the refused roll-back changed the schema: %+v, %v", sc, err)
	}
	clk.Advance(2 * time.Minute) // past the claim's lease
	if err := s.MigrateDownTo(ctx, sc.Want-1); err != nil {
		t.Fatalf("down-to once the lease expired: %v", err)
	}
}
