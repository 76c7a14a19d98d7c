package postgres

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/migrations"
)

// migrator is a goose provider of the ledger's migrations on s's
// database, for the tests that migrate to a version and back.
func migrator(t *testing.T, s *Store) *goose.Provider {
	t.Helper()
	db := stdlib.OpenDBFromPool(s.pool)
	t.Cleanup(func() { db.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.Postgres(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// versionColumns adds to an older schema the columns this binary's claim
// and pin write (migration 00020, which then finds them), so that a test
// of an older migration can claim and pin through the store.
func versionColumns(t *testing.T, s *Store) {
	t.Helper()
	if _, err := s.pool.Exec(context.Background(),
		`ALTER TABLE receipts ADD COLUMN IF NOT EXISTS digest_type text, ADD COLUMN IF NOT EXISTS content_version text;
		ALTER TABLE snapshot_pins ADD COLUMN IF NOT EXISTS resend_detail text`); err != nil {
		t.Fatal(err)
	}
}

// queryMap reads query's rows of a text and a V into a map.
func queryMap[V any](t *testing.T, s *Store, query string) map[string]V {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]V{}
	var (
		k string
		v V
	)
	if _, err := pgx.ForEachRow(rows, []any{&k, &v}, func() error { out[k] = v; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// countersAgree fails t unless week_state_counts, summed over its slots,
// holds what a scan of receipts counts by week, state and key id.
func countersAgree(t *testing.T, s *Store, when string) {
	t.Helper()
	kept := queryMap[int64](t, s, `SELECT iso_week || '/' || state || '/' || key_id, sum(n)::bigint FROM week_state_counts
		GROUP BY iso_week, state, key_id HAVING sum(n) <> 0`)
	scanned := queryMap[int64](t, s, `SELECT iso_week || '/' || state || '/' || key_id, count(*) FROM receipts GROUP BY iso_week, state, key_id`)
	if !maps.Equal(kept, scanned) {
		t.Fatalf("%s: the counters hold %v; a scan of receipts counts %v", when, kept, scanned)
	}
}

// partsColumn adds the column today's claim writes (migration 00019,
// fingerprint_parts) to a schema migrated to an older version, for the
// tests that run today's store on it.
func partsColumn(t *testing.T, s *Store) {
	t.Helper()
	if _, err := s.pool.Exec(context.Background(), `ALTER TABLE receipts ADD COLUMN IF NOT EXISTS fingerprint_parts text`); err != nil {
		t.Fatal(err)
	}
}

// keyOf is a well-formed key under key id kid, named by s.
func keyOf(kid, s string) digest.Key {
	return digest.Key(fmt.Sprintf("%s:%x", kid, sha256.Sum256([]byte(s))))
}

// Migration 00016 counts the receipts that exist by key id, every week,
// and from then on the triggers keep the counts by key id through claims,
// takeovers, state changes, ends and prunes; the pin's receipts by key id
// and the expectation's receipts under other key ids read them. Down, the
// counts by state stay right.
func TestMigrationCountsReceiptsByKeyID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &partClock{base: time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)}
	s, _ := OpenTest(t, pgtest.Schema(t), Config{Now: clk.Now, LedgerNow: clk.Now})
	p := migrator(t, s)
	if _, err := p.UpTo(ctx, 15); err != nil {
		t.Fatal(err)
	}
	versionColumns(t, s)
	partsColumn(t, s)
	claim := func(week digest.ISOWeek, keys ...digest.Key) []digest.ClaimResult {
		t.Helper()
		reqs := make([]digest.ClaimRequest, len(keys))
		for i, k := range keys {
			reqs[i] = digest.ClaimRequest{Keys: []digest.Key{k}, Fingerprint: "fp", Week: week, RunID: "run", Lease: time.Minute}
		}
		res, err := s.Claim(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	finish := func(week digest.ISOWeek, state digest.State, res ...digest.ClaimResult) {
		t.Helper()
		fins := make([]digest.Finish, len(res))
		for i, r := range res {
			fins[i] = digest.Finish{Key: r.Key, Token: r.Token, State: state, RunID: "run", Week: week, ProviderRef: "ref", Reason: "test"}
			if state == digest.StateRetryable {
				fins[i].NextAttempt = clk.Now().Add(time.Hour)
			}
		}
		if errs, err := s.Finish(ctx, fins); err != nil || len(errs) != len(fins) || errors.Join(errs...) != nil {
			t.Fatalf("finish %s: %v %v", state, err, errs)
		}
	}
	// Before 00016: 2026-W31 under k1 (3 sent, 1 claimed) and k2 (2 sent),
	// 2026-W32 under k2 (1 retryable).
	w31k1 := claim(w31, keyOf("k1", "a"), keyOf("k1", "b"), keyOf("k1", "c"), keyOf("k1", "d"))
	finish(w31, digest.StateSent, w31k1[:3]...)
	finish(w31, digest.StateSent, claim(w31, keyOf("k2", "e"), keyOf("k2", "f"))...)
	retry := claim(w32, keyOf("k2", "g"))
	finish(w32, digest.StateRetryable, retry...)

	if _, err := p.UpTo(ctx, 16); err != nil {
		t.Fatal(err)
	}
	countersAgree(t, s, "after 00016")
	pin := digest.SnapshotPin{Type: "weekly_activity", Week: w31, Version: "v3"}
	wp, err := s.PinSnapshot(ctx, pin, digest.WeekPin{AsOf: clk.Now(), Zone: "UTC", KeyID: "k2"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"k1": 4, "k2": 2}; !maps.Equal(wp.ReceiptsByKeyID, want) {
		t.Fatalf("2026-W31's receipts by key id %v, want %v", wp.ReceiptsByKeyID, want)
	}

	// After it: new claims under both key ids, a takeover of the expired
	// claim, a retry sent, an end, a row-by-row prune of 2026-W32.
	finish(w31, digest.StateSent, claim(w31, keyOf("k2", "h"), keyOf("k1", "i"))...)
	clk.Advance(2 * time.Minute)
	taken := claim(w31, w31k1[3].Key)
	if taken[0].Outcome != digest.OutcomeClaimed {
		t.Fatalf("take over the expired claim: %+v", taken[0])
	}
	finish(w31, digest.StateHeld, taken...)
	clk.Advance(2 * time.Hour)
	finish(w32, digest.StateSent, claim(w32, retry[0].Key)...)
	claim(w32, keyOf("k1", "j"))
	clk.Advance(2 * time.Minute)
	if _, err := s.EndClaims(ctx, []digest.EndClaim{{Keys: []digest.Key{keyOf("k1", "j")}, Week: w32, Reason: "test", RunID: "run"}}); err != nil {
		t.Fatal(err)
	}
	countersAgree(t, s, "after claims, a takeover, finishes and an end")
	e := ledger.Expectation{Shard: "all", AsOf: clk.Now(), Zone: "UTC", KeyID: "k2", RunID: "run", RecordedAt: clk.Now()}
	if err := s.RecordExpectation(ctx, pin, e); err != nil {
		t.Fatal(err)
	}
	ex, err := s.Expectations(ctx, pin)
	if err != nil || len(ex.Rows) != 1 || ex.Rows[0].OtherKeyIDs != 5 {
		t.Fatalf("expectation %+v, %v; want 5 receipts of 2026-W31 under k1", ex.Rows, err)
	}
	clk.Advance(60 * 24 * time.Hour)
	if _, err := s.Prune(ctx, ledger.PruneRequest{Before: clk.Now().Add(-24 * time.Hour), IncludeHeld: true}); err != nil {
		t.Fatal(err)
	}
	countersAgree(t, s, "after a prune")

	if _, err := p.DownTo(ctx, 15); err != nil {
		t.Fatal(err)
	}
	kept := queryMap[int64](t, s, `SELECT iso_week || '/' || state, sum(n)::bigint FROM week_state_counts GROUP BY iso_week, state HAVING sum(n) <> 0`)
	scanned := queryMap[int64](t, s, `SELECT iso_week || '/' || state, count(*) FROM receipts GROUP BY iso_week, state`)
	if !maps.Equal(kept, scanned) {
		t.Fatalf("down to 00015: the counters hold %v; a scan counts %v", kept, scanned)
	}
}

// keyCollations returns the collation of every column named key or
// address_key of the ledger's tables and partitions, by table and column.
func keyCollations(t *testing.T, s *Store) map[string]string {
	t.Helper()
	return queryMap[string](t, s, `SELECT c.relname || '.' || a.attname, co.collname
		FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_collation co ON co.oid = a.attcollation
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
		  AND a.attname IN ('key', 'address_key') AND a.attnum > 0 AND NOT a.attisdropped`)
}

// Migration 00017: every column holding a digest key or an address key,
// in every table and partition (those made after it too), compares
// bytewise (COLLATE "C") whatever the database's collation; down, they
// take the database's default again.
func TestMigrationKeysCompareBytewise(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openPartitioned(t)
	startWeek(t, s, w31) // a partition made after the migration
	sent := claimSend(t, s, w31, "s", 2, digest.StateSent)
	got := keyCollations(t, s)
	if len(got) < 10 || got["receipts.key"] != "C" || got["receipts_2026_w31.key"] != "C" || got["suppressions.key"] != "C" {
		t.Fatalf("key columns %v; want receipts, a partition and suppressions among them", got)
	}
	for col, coll := range got {
		if coll != "C" {
			t.Errorf("%s compares under %q; want C", col, coll)
		}
	}
	p := migrator(t, s)
	if _, err := p.DownTo(ctx, 16); err != nil {
		t.Fatal(err)
	}
	for col, coll := range keyCollations(t, s) {
		if coll != "default" {
			t.Errorf("down to 00016: %s compares under %q; want default", col, coll)
		}
	}
	if _, err := p.UpTo(ctx, 17); err != nil {
		t.Fatal(err)
	}
	versionColumns(t, s)
	if r, _, err := s.Show(ctx, sent[0]); err != nil || r.State != digest.StateSent {
		t.Fatalf("a receipt after down and up again: %+v %v", r, err)
	}
}

// A process in flight when a migration changes the type of a column its
// statements return (00017's collation, down and up again) goes on: the
// batch that meets its connection's stale statement is sent again and
// prepared anew. One connection, so that the statements prepared before
// are the ones run after. (Before, sendBatch kept a failed try's error
// into the next try, which then sent its batch without reading it: every
// retry, a deadlock's too, failed with the first error.)
func TestStatementsPreparedBeforeAMigrationRunAfterIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := OpenTest(t, pgtest.Schema(t)+"&pool_max_conns=1", Config{})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	startWeek(t, s, w31)
	claimSend(t, s, w31, "before", 2, digest.StateSent)
	suppressed := digest.SuppressionKey("k1:" + strings.Repeat("ab", 32))
	if _, err := s.Suppress(ctx, ledger.Suppression{Keys: []digest.SuppressionKey{suppressed}, Subject: digest.SubjectCustomer, Reason: digest.ReasonUnsubscribe, Source: "operator"}); err != nil {
		t.Fatal(err)
	}
	lookUp := func(when string) {
		t.Helper()
		if got, err := s.Suppressed(ctx, []digest.SuppressionKey{suppressed}); err != nil || !got[suppressed] {
			t.Fatalf("suppression look-up %s: %v %v", when, got, err)
		}
	}
	lookUp("before")
	p := migrator(t, s)
	if _, err := p.DownTo(ctx, 16); err != nil {
		t.Fatal(err)
	}
	versionColumns(t, s)
	partsColumn(t, s)
	claimSend(t, s, w31, "down", 2, digest.StateSent)
	lookUp("after 00017 down")
	if _, err := p.UpTo(ctx, 17); err != nil {
		t.Fatal(err)
	}
	keys := claimSend(t, s, w31, "up", 2, digest.StateSent)
	lookUp("after 00017 up")
	if r, _, err := s.Show(ctx, keys[0]); err != nil || r.State != digest.StateSent {
		t.Fatalf("a receipt sent after the migrations: %+v %v", r, err)
	}
}

// A batch PostgreSQL picks as a deadlock's victim is sent again, and the
// call returns what the second try did. The claim takes over two expired
// claims in key order; another transaction holds the second and then asks
// for the first, so the claim, which waited first, detects the deadlock
// and is rolled back; the other transaction commits and the retry claims
// both. (sendBatch used to skip reading the retry and return the
// deadlock, the retry's claims committed all the same.)
func TestABatchPickedAsADeadlockVictimIsSentAgainAndRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, clk := openPartitioned(t)
	startWeek(t, s, w31)
	before := claimN(t, s, w31, "deadlock", 2)
	clk.Advance(2 * time.Minute) // both leases end: a claim takes them over
	k1, k2 := before[0].Key, before[1].Key
	if k2 < k1 {
		k1, k2 = k2, k1
	}
	other, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var xid string
	lockRow := `SELECT 1 FROM receipts WHERE key = $1 AND iso_week = $2 FOR UPDATE`
	// The other transaction never detects it (the claim's backend does,
	// after the server's deadlock_timeout), so the claim is the victim.
	if _, err := tx.Exec(ctx, `SET LOCAL deadlock_timeout = '5min'`); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, lockRow, string(k2), w31.String()); err != nil {
		t.Fatal(err)
	}
	type result struct {
		res []digest.ClaimResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		reqs := []digest.ClaimRequest{{Keys: []digest.Key{k1}, Fingerprint: "fp", Week: w31, RunID: "again", Lease: time.Minute},
			{Keys: []digest.Key{k2}, Fingerprint: "fp", Week: w31, RunID: "again", Lease: time.Minute}}
		res, err := s.Claim(ctx, reqs)
		done <- result{res, err}
	}()
	// The claim holds k1 and waits for the other transaction's k2.
	for waiting := 0; waiting == 0; {
		select {
		case r := <-done:
			t.Fatalf("the claim returned before it waited for the other transaction: %+v", r)
		default:
		}
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted AND transactionid::text = $1`, xid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Asking for k1 closes the cycle; it returns once the claim is rolled back.
	if _, err := tx.Exec(ctx, lockRow, string(k1), w31.String()); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("claim after a deadlock: %v; want the retry's result", r.err)
	}
	for i, c := range r.res {
		if c.Outcome != digest.OutcomeClaimed || c.Token == before[0].Token || c.Token == before[1].Token {
			t.Errorf("claim %d after the deadlock: %+v; want taken over with a new token", i, c)
		}
	}
}
