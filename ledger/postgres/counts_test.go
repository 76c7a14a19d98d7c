package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/ledger/postgres"
)

// Two transactions changing the states of different receipts of one week
// at once never wait for each other on the week's state counters: each
// backend counts into a slot of its own (migration 00013). With slots
// shared by pid modulo 64, the second backend of a slot waited for the
// first's commit, and two statements locking the same two counter rows in
// opposite orders deadlocked (eight shard processes on one database).
// The test looks for two connections whose pids share a slot of the old
// scheme, so that it would wait there, and bounds the wait with
// lock_timeout: an error, not a hang.
func TestWeekStateCountersNeverMakeBackendsWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	s, pool := postgres.OpenTest(t, url, postgres.Config{})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	week := digest.WeekOf(time.Now(), time.UTC)
	if _, err := s.StartWeek(ctx, digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	keys := []digest.Key{digest.Key("k1:" + strings.Repeat("a1", 32)), digest.Key("k1:" + strings.Repeat("b2", 32))}
	for _, key := range keys {
		res, err := s.Claim(ctx, []digest.ClaimRequest{{Keys: []digest.Key{key}, Fingerprint: "fp", Week: week, RunID: "r1", Lease: time.Hour}})
		if err != nil || res[0].Outcome != digest.OutcomeClaimed {
			t.Fatalf("claim: %v %+v", err, res)
		}
	}

	// Two connections whose pids share a slot of the old scheme, so that
	// the second would wait there: pids are handed out in turn, so one
	// connection in 64 matches the first. Any two serve if none does.
	var conns []*pgx.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close(context.Background())
		}
	})
	connect := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := connect()
	conns = append(conns, first)
	var second *pgx.Conn
	for range 400 {
		c := connect()
		second = c
		if c.PgConn().PID()%64 == first.PgConn().PID()%64 {
			break
		}
		c.Close(ctx)
	}
	conns = append(conns, second)
	t.Logf("backends %d and %d (pid%%64 %d and %d)", first.PgConn().PID(), second.PgConn().PID(),
		first.PgConn().PID()%64, second.PgConn().PID()%64)
	a, b := 0, 1

	const toSent = `UPDATE receipts SET previous_state = state, state = 'sent', sent_at = now() WHERE key = $1`
	txA, err := conns[a].Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer txA.Rollback(ctx)
	if _, err := txA.Exec(ctx, toSent, string(keys[0])); err != nil {
		t.Fatal(err)
	}
	txB, err := conns[b].Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer txB.Rollback(ctx)
	if _, err := txB.Exec(ctx, `SET LOCAL lock_timeout = '5s'`); err != nil {
		t.Fatal(err)
	}
	if _, err := txB.Exec(ctx, toSent, string(keys[1])); err != nil {
		t.Fatalf("a state change of another receipt waited for an open transaction's counters: %v", err)
	}
	if err := txB.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	var sent, claimed int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(n) FILTER (WHERE state = 'sent'), 0), coalesce(sum(n) FILTER (WHERE state = 'claimed'), 0)
		FROM week_state_counts WHERE iso_week = $1`, week.String()).Scan(&sent, &claimed); err != nil {
		t.Fatal(err)
	}
	if sent != 2 || claimed != 0 {
		t.Fatalf("the week's counters: %d sent, %d claimed; want 2 and 0", sent, claimed)
	}
}
