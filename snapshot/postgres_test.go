package snapshot_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/snapshot"
)

var pgWeek = digest.ISOWeek{Year: 2026, Week: 48}

func seededPool(t *testing.T, n int) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, _, err := snapshot.Seed(ctx, pool, snapshot.Synthetic(n, pgWeek, 7)); err != nil {
		t.Fatal(err)
	}
	return pool
}

func collect(t *testing.T, src digest.Source, q digest.SourceQuery) ([]digest.Record, []error) {
	t.Helper()
	var recs []digest.Record
	var bad []error
	for r, err := range src.Records(context.Background(), q) {
		if err != nil {
			var be *digest.BadRecordError
			if !errors.As(err, &be) {
				t.Fatalf("fatal source error: %v", err)
			}
			bad = append(bad, err)
			continue
		}
		recs = append(recs, r)
	}
	return recs, bad
}

func TestPostgresSourceMatchesSyntheticAcrossPages(t *testing.T) {
	t.Parallel()
	pool := seededPool(t, 257)
	q := digest.SourceQuery{Week: pgWeek, Location: time.UTC, AsOf: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	got, bad := collect(t, snapshot.NewPostgres(pool, 50), q)
	if len(bad) > 0 {
		t.Fatalf("bad records: %v", bad)
	}
	var want []digest.Record
	for r := range snapshot.Synthetic(257, pgWeek, 7) {
		want = append(want, r)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d customers, want %d", len(got), len(want))
	}
	spec := digest.Spec{Week: pgWeek, Location: time.UTC, Type: "weekly_activity", Version: "v1"}
	for i := range want {
		dg, err1 := digest.Build(got[i], spec)
		dw, err2 := digest.Build(want[i], spec)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if dg.Fingerprint() != dw.Fingerprint() {
			t.Fatalf("customer %s: fingerprint from PostgreSQL differs from the generated one", want[i].Customer.ID)
		}
	}
}

func TestPostgresSourceAsOfExcludesLateRows(t *testing.T) {
	t.Parallel()
	pool := seededPool(t, 3)
	ctx := context.Background()
	asOf := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	src := snapshot.NewPostgres(pool, 0)
	q := digest.SourceQuery{Week: pgWeek, Location: time.UTC, AsOf: asOf}
	before, _ := collect(t, src, q)

	// A late row: occurred in the week, recorded after as_of.
	if _, err := pool.Exec(ctx, `INSERT INTO digest_activity VALUES ('cust_0000001', '2026-11-25T10:00:00Z', $1, 'fee', -100, 'EUR', 'late')`, asOf.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	// A row outside the week, recorded in time.
	if _, err := pool.Exec(ctx, `INSERT INTO digest_activity VALUES ('cust_0000001', '2026-12-01T10:00:00Z', '2026-11-25T10:00:00Z', 'fee', -100, 'EUR', 'next week')`); err != nil {
		t.Fatal(err)
	}
	after, _ := collect(t, src, q)
	if !slices.EqualFunc(before, after, func(a, b digest.Record) bool { return slices.Equal(a.Activity, b.Activity) }) {
		t.Fatal("a row recorded after as_of, or outside the week, changed the snapshot")
	}
	// Exactly at as_of is included.
	if _, err := pool.Exec(ctx, `INSERT INTO digest_activity VALUES ('cust_0000002', '2026-11-25T10:00:00Z', $1, 'fee', -100, 'EUR', 'on time')`, asOf); err != nil {
		t.Fatal(err)
	}
	again, _ := collect(t, src, q)
	if len(again[1].Activity) != len(before[1].Activity)+1 {
		t.Fatal("a row recorded exactly at as_of must be included")
	}
}

func TestPostgresSourceShardsPartitionCustomers(t *testing.T) {
	t.Parallel()
	pool := seededPool(t, 120)
	src := snapshot.NewPostgres(pool, 17)
	seen := map[string]int{}
	for i := range 3 {
		q := digest.SourceQuery{Week: pgWeek, AsOf: time.Now(), Shard: digest.Shard{Index: i, Count: 3}}
		recs, _ := collect(t, src, q)
		for _, r := range recs {
			if got := digest.ShardOf(r.Customer.ID, 3); got != i {
				t.Fatalf("customer %s came in shard %d, digest.ShardOf says %d", r.Customer.ID, i, got)
			}
			seen[r.Customer.ID]++
		}
	}
	if len(seen) != 120 {
		t.Fatalf("shards covered %d customers, want 120", len(seen))
	}
}

func TestPostgresSourceBadRowsAreReportedNotFatal(t *testing.T) {
	t.Parallel()
	pool := seededPool(t, 4)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `ALTER TABLE digest_activity ALTER COLUMN currency DROP NOT NULL`); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`INSERT INTO digest_activity VALUES ('cust_0000002', '2026-11-25T10:00:00Z', '2026-11-25T10:00:00Z', 'fee', -100, 'XYZ', 'bad currency')`,
		`INSERT INTO digest_activity VALUES ('cust_0000003', '2026-11-25T10:00:00Z', '2026-11-25T10:00:00Z', 'fee', -100, NULL, 'null currency')`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE digest_customers ALTER COLUMN email DROP NOT NULL;
		INSERT INTO digest_customers (customer_id, email) VALUES ('cust_0000005', NULL)`); err != nil {
		t.Fatal(err)
	}
	q := digest.SourceQuery{Week: pgWeek, AsOf: time.Now()}
	recs, bad := collect(t, snapshot.NewPostgres(pool, 0), q)
	if len(recs) != 2 || len(bad) != 3 {
		t.Fatalf("got %d good and %d bad records, want 2 and 3: %v", len(recs), len(bad), bad)
	}
	fields := map[string]int{}
	for _, err := range bad {
		var be *digest.BadRecordError
		errors.As(err, &be)
		fields[be.Field]++
	}
	if fields["currency"] != 2 || fields["email"] != 1 {
		t.Errorf("bad records by field = %v, want 2 currency and 1 email", fields)
	}
}

func TestPostgresSourceRefusesUnpinnedSnapshot(t *testing.T) {
	t.Parallel()
	pool := seededPool(t, 1)
	for _, err := range snapshot.NewPostgres(pool, 0).Records(context.Background(), digest.SourceQuery{Week: pgWeek}) {
		if err == nil {
			t.Fatal("an unpinned query must fail, not read rows recorded at any time")
		}
		return
	}
	t.Fatal("no result")
}

// The suppression column is optional: without it (the contract before it
// existed) every customer is read as subscribed; once added, a non-NULL
// unsubscribed_at marks the customer suppressed.
func TestPostgresSourceOptionalSuppression(t *testing.T) {
	t.Parallel()
	pool := seededPool(t, 12)
	q := digest.SourceQuery{Week: pgWeek, Location: time.UTC, AsOf: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	suppressed := func() []string {
		recs, bad := collect(t, snapshot.NewPostgres(pool, 5), q)
		if len(bad) > 0 || len(recs) != 12 {
			t.Fatalf("%d records, bad %v", len(recs), bad)
		}
		var ids []string
		for _, r := range recs {
			if r.Customer.Suppressed {
				ids = append(ids, r.Customer.ID)
			}
		}
		return ids
	}
	if got := suppressed(); len(got) != 0 {
		t.Fatalf("without the column: suppressed %v", got)
	}
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `ALTER TABLE digest_customers ADD COLUMN unsubscribed_at timestamptz`); err != nil {
		t.Fatal(err)
	}
	if got := suppressed(); len(got) != 0 {
		t.Fatalf("with the column all NULL: suppressed %v", got)
	}
	var ids []string
	if err := pool.QueryRow(ctx, `SELECT array_agg(customer_id ORDER BY customer_id) FROM (SELECT customer_id FROM digest_customers ORDER BY customer_id DESC LIMIT 2) s`).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE digest_customers SET unsubscribed_at = now() WHERE customer_id = ANY($1)`, ids); err != nil {
		t.Fatal(err)
	}
	if got := suppressed(); !slices.Equal(got, ids) {
		t.Fatalf("suppressed %v, want %v", got, ids)
	}
}

// The time_zone column is optional: without it (the contract before it)
// no customer has a zone; with it, NULL is none, an IANA name is read, and
// a name that is not one is a bad record of its customer (the others are
// read on).
func TestPostgresSourceOptionalTimeZone(t *testing.T) {
	t.Parallel()
	pool := seededPool(t, 12)
	q := digest.SourceQuery{Week: pgWeek, Location: time.UTC, AsOf: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	zonesOf := func(wantBad int) map[string]string {
		recs, bad := collect(t, snapshot.NewPostgres(pool, 5), q)
		if len(bad) != wantBad || len(recs)+len(bad) != 12 {
			t.Fatalf("%d records, bad %v; want %d bad", len(recs), bad, wantBad)
		}
		m := map[string]string{}
		for _, r := range recs {
			if r.Customer.TimeZone != "" {
				m[r.Customer.ID] = r.Customer.TimeZone
			}
		}
		return m
	}
	if got := zonesOf(0); len(got) != 0 {
		t.Fatalf("without the column: zones %v", got)
	}
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `ALTER TABLE digest_customers ADD COLUMN time_zone text`); err != nil {
		t.Fatal(err)
	}
	if got := zonesOf(0); len(got) != 0 {
		t.Fatalf("with the column all NULL: zones %v", got)
	}
	var ids []string
	if err := pool.QueryRow(ctx, `SELECT array_agg(customer_id ORDER BY customer_id) FROM (SELECT customer_id FROM digest_customers ORDER BY customer_id LIMIT 2) s`).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE digest_customers SET time_zone = 'Asia/Tokyo' WHERE customer_id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE digest_customers SET time_zone = 'Mars/Olympus_Mons' WHERE customer_id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	if got := zonesOf(1); len(got) != 1 || got[ids[0]] != "Asia/Tokyo" {
		t.Fatalf("zones %v, want %s in Asia/Tokyo", got, ids[0])
	}
}
