package ledgertest

import (
	"context"
	"strings"
	"testing"
)

// testDurabilityHolds: a migrated store reports the settings a committed
// receipt's survival depends on, and they hold (PostgreSQL: fsync,
// full_page_writes, synchronous_commit; SQLite: synchronous FULL, WAL).
func testDurabilityHolds(t *testing.T, d Driver) {
	s, _, cfg := fresh(t, d)
	ss, err := s.Durability(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.Err(); err != nil {
		t.Fatalf("durability: %v", err)
	}
	want := "synchronous=FULL journal_mode=wal"
	if cfg.URL != "" {
		want = "synchronous_commit=on"
	}
	if !strings.Contains(ss.String(), want) {
		t.Fatalf("settings %q, want them to include %q", ss, want)
	}
}
