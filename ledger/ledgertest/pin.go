package ledgertest

import (
	"context"
	"database/sql"
	"maps"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/digest"
)

// The pin counts the week's receipts by key id: every receipt of the ISO
// week, whatever its state, and none of another week.
func testPinSnapshotCountsReceiptsByKeyID(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	k1, k2 := keyring(t, "k1"), keyring(t, "k2")
	send(t, s, k1.Candidates(identity("customer_1")), "<1@x>")
	send(t, s, k1.Candidates(identity("customer_2")), "<2@x>")
	mustClaim(t, s, req(k1.Candidates(identity("customer_3")), "fp1")) // in flight
	send(t, s, k2.Candidates(identity("customer_4")), "<4@x>")
	other := identity("customer_5")
	other.Week = digest.ISOWeek{Year: 2026, Week: 33}
	r := req(k1.Candidates(other), "fp1")
	r.Week = other.Week
	mustClaim(t, s, r)

	wp, err := s.PinSnapshot(ctx, digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v3"},
		digest.WeekPin{AsOf: clk.Now(), Zone: "UTC", KeyID: "k2"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"k1": 3, "k2": 1}; !maps.Equal(wp.ReceiptsByKeyID, want) {
		t.Fatalf("receipts by key id %v, want %v", wp.ReceiptsByKeyID, want)
	}
	empty, err := s.PinSnapshot(ctx, digest.SnapshotPin{Type: "weekly_activity", Week: digest.ISOWeek{Year: 2026, Week: 40}, Version: "v3"},
		digest.WeekPin{AsOf: clk.Now(), Zone: "UTC", KeyID: "k2"})
	if err != nil || len(empty.ReceiptsByKeyID) != 0 {
		t.Fatalf("a week without receipts: %v %v", empty.ReceiptsByKeyID, err)
	}
}

// A pin made before zones and key ids were pinned (NULL in both) adopts
// the zone and key id of the first run after the upgrade, once; its as_of
// never changes.
func testPinSnapshotFromBeforeZonesAdoptsFirstRun(t *testing.T, be Driver) {
	s, clk, cfg := fresh(t, be)
	ctx := context.Background()
	pin := digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v3"}
	old := clk.Now().Add(-48 * time.Hour)
	insertLegacyPin(t, cfg, pin, old)

	first, err := s.PinSnapshot(ctx, pin, digest.WeekPin{AsOf: clk.Now(), Zone: "Europe/Berlin", KeyID: "k2"})
	if err != nil || !first.AsOf.Equal(old) || first.Zone != "Europe/Berlin" || first.KeyID != "k2" {
		t.Fatalf("first run after the upgrade: %+v %v, want as_of %v, Europe/Berlin, k2", first, err, old)
	}
	second, err := s.PinSnapshot(ctx, pin, digest.WeekPin{AsOf: clk.Now(), Zone: "UTC", KeyID: "k3"})
	if err != nil || !second.AsOf.Equal(old) || second.Zone != "Europe/Berlin" || second.KeyID != "k2" {
		t.Fatalf("second run: %+v %v, want the adopted Europe/Berlin and k2", second, err)
	}
}

// insertLegacyPin writes a pin as the schema before 00003 would have:
// without zone and key id.
func insertLegacyPin(t *testing.T, cfg Database, pin digest.SnapshotPin, asOf time.Time) {
	t.Helper()
	ctx := context.Background()
	if cfg.URL == "" {
		db, err := sql.Open("sqlite", "file:"+cfg.Path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, `INSERT INTO snapshot_pins (digest_type, iso_week, version, as_of, created_at) VALUES (?, ?, ?, ?, ?)`,
			pin.Type, pin.Week.String(), pin.Version, asOf.UnixMicro(), asOf.UnixMicro()); err != nil {
			t.Fatal(err)
		}
		return
	}
	conn, err := pgx.Connect(ctx, cfg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO snapshot_pins (digest_type, iso_week, version, as_of, created_at) VALUES ($1, $2, $3, $4, $4)`,
		pin.Type, pin.Week.String(), pin.Version, asOf); err != nil {
		t.Fatal(err)
	}
}
