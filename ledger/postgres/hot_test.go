package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/ledger/postgres"
)

// happyPathColumns are the columns of receipts that the send mark and the
// finish to sent set (sql/fence.sql, Start and Finish).
var happyPathColumns = []string{"state", "previous_state", "send_started", "send_started_at", "updated_at",
	"lease_expires_at", "sent_at", "provider_ref", "next_attempt_at", "maybe_sent", "last_error", "address_key", "run_id"}

// No index of receipts, or of any week's partition, holds a column the
// happy path changes, in its key, an expression or its predicate:
// PostgreSQL makes an update HOT (no index entry, less WAL) only when no
// such column changes, so the send mark and the finish to sent can both
// be HOT (migration 00012 moved the attention index from state to the
// generated attention column, NULL while claimed or sent).
func TestHappyPathChangesNoIndexedColumn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := postgres.OpenTest(t, pgtest.Schema(t), postgres.Config{})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	week := digest.WeekOf(time.Now(), time.UTC)
	if _, err := s.StartWeek(ctx, digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `
		SELECT i.indexrelid::regclass::text, a.attname::text
		FROM pg_index i
		JOIN pg_partition_tree('receipts') p ON p.relid = i.indrelid
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE a.attnum = ANY(i.indkey)
			OR coalesce(pg_get_expr(i.indpred, i.indrelid), '') ~ ('\m' || a.attname || '\M')
			OR coalesce(pg_get_expr(i.indexprs, i.indrelid), '') ~ ('\m' || a.attname || '\M')
		ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	var index, column string
	seen := map[string]bool{}
	if _, err := pgx.ForEachRow(rows, []any{&index, &column}, func() error {
		seen[index] = true
		if slices.Contains(happyPathColumns, column) {
			t.Errorf("index %s holds %s, which the happy path changes: its updates cannot be HOT", index, column)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) < 4 { // the parent's two indexes and a partition's two
		t.Fatalf("found %d indexes of receipts and its partitions: %v; the query missed them", len(seen), seen)
	}
}
