package snapshot_test

import (
	"bytes"
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/snapshot"
)

// The page statement keeps its plan whatever the statistics: a nested loop
// probing digest_activity through its (customer_id, occurred_at) index per
// customer of a page read by primary key, with fresh statistics or none,
// custom plan or generic, for the whole week, one shard and a retry pass's
// customers. A join the planner may turn into a hash or merge
// join over a sequential scan of the week's activity (what the page
// statement was before: a merge join sorting all of it on disk for every
// page without statistics) fails here.
func TestPostgresSourcePlanWithoutStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, analyze := range []bool{true, false} {
		pool := statsPool(t, 3000, analyze)
		for _, read := range []struct {
			shard     digest.Shard
			customers []string
		}{
			{digest.Shard{}, nil},
			{digest.Shard{Index: 1, Count: 4}, nil},
			{digest.Shard{}, []string{"cust_0000010", "cust_0001500", "cust_0002999"}},
		} {
			q := digest.SourceQuery{Week: pgWeek, Location: time.UTC, AsOf: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
				Shard: read.shard, Customers: read.customers}
			for _, mode := range []string{"custom", "generic"} {
				plan := explainPage(ctx, t, pool, 100, q, mode)
				for _, bad := range []string{"Seq Scan on digest_activity", "Hash", "Merge", "external", "Seq Scan on digest_customers"} {
					if strings.Contains(plan, bad) {
						t.Errorf("analyzed %v, %+v, %s plan has %q:\n%s", analyze, read, mode, bad, plan)
					}
				}
				for _, want := range []string{"Nested Loop Left Join", "Index Scan using digest_activity_customer_occurred on digest_activity"} {
					if !strings.Contains(plan, want) {
						t.Errorf("analyzed %v, %+v, %s plan lacks %q:\n%s", analyze, read, mode, want, plan)
					}
				}
			}
		}
	}
}

// The same week reads the same records with fresh statistics and without
// any, on custom plans and on generic ones: the whole week, one shard and
// a retry pass's customers, across pages; late rows and the next week's
// stay out of all of them.
func TestPostgresSourceSameRecordsWithoutStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 700
	asOf := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	pools := map[string]*pgxpool.Pool{"analyzed": statsPool(t, n, true), "no statistics": statsPool(t, n, false)}
	for _, pool := range pools {
		if _, err := pool.Exec(ctx, `INSERT INTO digest_activity VALUES
    ('cust_0000150', '2026-11-25T10:00:00Z', $1, 'fee', -100, 'EUR', 'late'),
    ('cust_0000150', '2026-11-30T00:00:00Z', '2026-11-30T00:00:01Z', 'fee', -100, 'EUR', 'next week')`, asOf.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	named := []string{"cust_0000003", "cust_0000150", "cust_0000151", "cust_0000420", "cust_0000699", "cust_0000700"}
	queries := map[string]digest.SourceQuery{
		"week":         {Week: pgWeek, Location: time.UTC, AsOf: asOf},
		"shard 2 of 3": {Week: pgWeek, Location: time.UTC, AsOf: asOf, Shard: digest.Shard{Index: 2, Count: 3}},
		"customers":    {Week: pgWeek, Location: time.UTC, AsOf: asOf, Customers: named},
		"customers of shard 0 of 2": {Week: pgWeek, Location: time.UTC, AsOf: asOf, Customers: named,
			Shard: digest.Shard{Index: 0, Count: 2}},
	}
	for name, q := range queries {
		// What the generator made, filtered as the query asks.
		var want []digest.Record
		for r := range snapshot.Synthetic(n, pgWeek, 7) {
			if q.Wants(r.Customer.ID) {
				want = append(want, r)
			}
		}
		for pname, pool := range pools {
			for _, mode := range planModes {
				setPlanMode(ctx, t, pool, mode)
				got, bad := collect(t, snapshot.NewPostgres(pool, 40), q)
				setPlanMode(ctx, t, pool, "auto")
				if len(bad) > 0 {
					t.Fatalf("%s, %s, %s plans: bad records %v", name, pname, mode, bad)
				}
				if !sameRecords(sortedActivity(got), sortedActivity(want)) {
					t.Errorf("%s, %s, %s plans: %d records differ from the %d generated", name, pname, mode, len(got), len(want))
				}
			}
		}
	}
}

// sortedActivity sorts each record's activity: its order is not part of
// the source's contract (digest.Build orders it).
func sortedActivity(recs []digest.Record) []digest.Record {
	for _, r := range recs {
		slices.SortFunc(r.Activity, func(p, q digest.Activity) int {
			return cmp.Or(p.OccurredAt.Compare(q.OccurredAt), p.RecordedAt.Compare(q.RecordedAt), cmp.Compare(p.Kind, q.Kind),
				cmp.Compare(p.AmountMinor, q.AmountMinor), cmp.Compare(p.Currency, q.Currency), cmp.Compare(p.Description, q.Description))
		})
	}
	return recs
}

// sameRecords compares records field by field, times by instant.
func sameRecords(a, b []digest.Record) bool {
	return slices.EqualFunc(a, b, func(x, y digest.Record) bool {
		return x.Customer == y.Customer && slices.EqualFunc(x.Activity, y.Activity, func(p, q digest.Activity) bool {
			return p.OccurredAt.Equal(q.OccurredAt) && p.RecordedAt.Equal(q.RecordedAt) && p.Kind == q.Kind &&
				p.AmountMinor == q.AmountMinor && p.Currency == q.Currency && p.Description == q.Description
		})
	})
}

// A digest_activity table without the index the probe needs (an operator
// who skipped it) is read with a join instead: a probe per customer would
// scan the whole table for each one. The records are the same, the
// activity is scanned once per page, never once per customer, and the
// source says once what to create.
func TestPostgresSourceWithoutActivityIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 700
	pool := statsPool(t, n, true)
	if _, err := pool.Exec(ctx, `DROP INDEX digest_activity_customer_occurred`); err != nil {
		t.Fatal(err)
	}
	asOf := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var logs bytes.Buffer
	src := snapshot.NewPostgres(pool, 40)
	src.SetLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	for name, q := range map[string]digest.SourceQuery{
		"week":         {Week: pgWeek, Location: time.UTC, AsOf: asOf},
		"shard 2 of 3": {Week: pgWeek, Location: time.UTC, AsOf: asOf, Shard: digest.Shard{Index: 2, Count: 3}},
	} {
		var want []digest.Record
		for r := range snapshot.Synthetic(n, pgWeek, 7) {
			if q.Wants(r.Customer.ID) {
				want = append(want, r)
			}
		}
		got, bad := collect(t, src, q)
		if len(bad) > 0 {
			t.Fatalf("%s: bad records %v", name, bad)
		}
		if !sameRecords(sortedActivity(got), sortedActivity(want)) {
			t.Errorf("%s: %d records differ from the %d generated", name, len(got), len(want))
		}
		// Custom plans only: without the index the source never lets a
		// page run on a generic plan (read.custom).
		plan := explainPage(ctx, t, pool, 100, q, "custom")
		for line := range strings.Lines(plan) {
			if strings.Contains(line, "Scan on digest_activity") && !strings.Contains(line, "loops=1)") {
				t.Errorf("%s: the plan scans digest_activity more than once a page:\n%s", name, plan)
			}
		}
	}
	if c := strings.Count(logs.String(), "no index led by customer_id"); c != 1 {
		t.Errorf("the missing index was said %d times, want once:\n%s", c, logs.String())
	}
}
