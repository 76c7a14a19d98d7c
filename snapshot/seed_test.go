package snapshot_test

import (
	"context"
	"iter"
	"reflect"
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

// Seeding ends with ANALYZE of both tables it loaded, the first load and
// a later week alike.
func TestSeedAnalyzes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := seededPool(t, 30) // week 48, through Seed
	analyzed := func() map[string]int64 {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT relname, analyze_count FROM pg_stat_user_tables
WHERE schemaname = current_schema() AND relname IN ('digest_customers', 'digest_activity') AND last_analyze IS NOT NULL`)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for rows.Next() {
			var name string
			var n int64
			if err := rows.Scan(&name, &n); err != nil {
				t.Fatal(err)
			}
			out[name] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// The statistics collector reports asynchronously: wait for the
	// counters rather than sleep.
	waitAnalyzed := func(min int64) map[string]int64 {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := analyzed()
			if got["digest_customers"] >= min && got["digest_activity"] >= min || time.Now().After(deadline) {
				return got
			}
			if _, err := pool.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
				t.Fatal(err)
			}
		}
	}
	first := waitAnalyzed(1)
	if first["digest_customers"] < 1 || first["digest_activity"] < 1 {
		t.Fatalf("after the first seed: analyze counts %v, want both tables analyzed", first)
	}
	if _, _, err := snapshot.Seed(ctx, pool, snapshot.Synthetic(40, digest.ISOWeek{Year: 2026, Week: 49}, 7)); err != nil {
		t.Fatal(err)
	}
	second := waitAnalyzed(first["digest_customers"] + 1)
	if second["digest_customers"] <= first["digest_customers"] || second["digest_activity"] <= first["digest_activity"] {
		t.Fatalf("seeding a second week: analyze counts %v then %v, want both moved", first, second)
	}
}

// Issue 19: seed wrote the activity of a week not over yet with recorded_at
// in the future. SyntheticUntil keeps Synthetic's rows recorded by until,
// and only those.
func TestSyntheticUntilWritesNothingRecordedLater(t *testing.T) {
	t.Parallel()
	week := digest.ISOWeek{Year: 2026, Week: 49}
	until := week.Start(time.UTC).Add(60 * time.Hour) // Wednesday noon
	var all, before []digest.Activity
	for r := range snapshot.Synthetic(200, week, 7) {
		all = append(all, r.Activity...)
	}
	for r := range snapshot.SyntheticUntil(200, week, 7, until) {
		before = append(before, r.Activity...)
	}
	var want []digest.Activity
	for _, a := range all {
		if !a.RecordedAt.After(until) {
			want = append(want, a)
		}
	}
	if len(want) == 0 || len(want) == len(all) || !reflect.DeepEqual(before, want) {
		t.Fatalf("SyntheticUntil kept %d of %d rows, want the %d recorded by %v", len(before), len(all), len(want), until)
	}
}
