package snapshot_test

import (
	"context"
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/snapshot"
)

func activityRows(records iter.Seq[digest.Record]) int {
	n := 0
	for r := range records {
		n += len(r.Activity)
	}
	return n
}

// Seeding tables that already hold customers adds the new customers and
// the week's activity (a demo of several weeks); seeding the same week
// again adds nothing.
func TestSeedAddsWeeksToLoadedTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := seededPool(t, 30) // week 48
	w49 := digest.ISOWeek{Year: 2026, Week: 49}
	c, rows, err := snapshot.Seed(ctx, pool, snapshot.Synthetic(40, w49, 7))
	if err != nil {
		t.Fatalf("seed a second week into loaded tables: %v", err)
	}
	if want := activityRows(snapshot.Synthetic(40, w49, 7)); c != 40 || int(rows) != want {
		t.Fatalf("seeded %d customers and %d rows, want 40 and %d", c, rows, want)
	}
	if _, again, err := snapshot.Seed(ctx, pool, snapshot.Synthetic(40, w49, 7)); err != nil || again != 0 {
		t.Fatalf("seeding the same week again added %d rows (%v), want 0", again, err)
	}
	asOf := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		week      digest.ISOWeek
		customers int
		rows      int
	}{
		{pgWeek, 40, activityRows(snapshot.Synthetic(30, pgWeek, 7))},
		{w49, 40, activityRows(snapshot.Synthetic(40, w49, 7))},
	} {
		got, bad := collect(t, snapshot.NewPostgres(pool, 0), digest.SourceQuery{Week: c.week, Location: time.UTC, AsOf: asOf})
		if len(bad) > 0 || len(got) != c.customers || activityRows(slices.Values(got)) != c.rows {
			t.Fatalf("%s: %d customers (%d bad), want %d customers and %d activity rows", c.week, len(got), len(bad), c.customers, c.rows)
		}
	}
}
