// Package postgres is the receipt ledger on PostgreSQL (pgx v5): each
// claim, send mark and finish is one multi-row statement with its history
// rows, where the transition has one (the happy path has none; see package
// ledger), in the same statement. It implements ledger.Store and passes
// the contract suite of package ledgertest.
package postgres

import (
	"context"
	"embed"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/internal/sqlfile"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

// queries are the statements of sql/*.sql, by name.
var queries = sqlfile.MustParse(sqlFiles, "sql")

var (
	pinSnapshotSQL   = queries.Get("PinSnapshot")
	countByKeyIDSQL  = queries.Get("CountByKeyID")
	pinnedSQL        = queries.Get("Pinned")
	sentByVersionSQL = queries.Get("SentByVersion")
	weekPinsSQL      = queries.Get("WeekPins")
	repinSQL         = queries.Get("Repin")
	observedKeysSQL  = queries.Get("ObservedKeys")
)

// Store is the ledger on PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
	// ledgerNow is Config.LedgerNow: nil but in tests.
	ledgerNow func() time.Time
	log       *slog.Logger
	// leaves holds, per week ("2026-W48"), the week's start statements
	// (weekStarts), aimed at its partition when the role may update it
	// there (see startFor).
	leaves sync.Map
}

var (
	_ digest.Ledger = (*Store)(nil)
	_ ledger.Store  = (*Store)(nil)
)

// Config configures a Store. The zero value works: the process's clock,
// the server's clock for decisions, no log.
type Config struct {
	// Now is the caller's clock; default time.Now. The times the store
	// returns for its caller to compare (a lease's end, a next attempt)
	// are on it; leases and retries are decided by the server's clock
	// (see ledger.CallTimes).
	Now func() time.Time
	// LedgerNow stands in for the server's clock, for tests that move
	// time (River's stubbed time): nil, as every command leaves it, uses
	// PostgreSQL's now() for every lease and retry decision and every
	// time stamped on a receipt.
	LedgerNow func() time.Time
	// Logger receives migration progress; default discards.
	Logger *slog.Logger
}

// New returns the ledger on pool, a pool the caller built (NewPool builds
// one with the settings the ledger relies on) and closes after the last
// use of the store: Store.Close leaves it open, so that the caller can
// share it (the snapshot source reads on it).
func New(pool *pgxpool.Pool, cfg Config) *Store {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Store{pool: pool, now: cfg.Now, ledgerNow: cfg.LedgerNow, log: cfg.Logger}
}

// Close releases nothing: the pool is the caller's, who closes it.
func (s *Store) Close() error { return nil }

// nowUTC is the caller's clock at PostgreSQL's microsecond precision.
func (s *Store) nowUTC() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// ledgerTimeSQL reads the server's clock, or its stand-in $1.
const ledgerTimeSQL = "SELECT coalesce($1::timestamptz, now())"

// clockArg is the statements' stand-in for the server's clock: NULL, so
// that they read now(), unless a test stubs it (Config.LedgerNow).
func (s *Store) clockArg() *time.Time {
	if s.ledgerNow == nil {
		return nil
	}
	t := s.ledgerNow().UTC().Truncate(time.Microsecond)
	return &t
}

// maxBatchTries bounds retries of a batch PostgreSQL aborted for a deadlock
// or serialization failure; the aborted attempt changed nothing.
const maxBatchTries = 3

// planCacheMode is the plan cache a batch's statements use.
type planCacheMode int

const (
	// customPlans: the connection's force_custom_plan (see PoolConfig):
	// each statement planned with its arguments. For the multi-row calls.
	customPlans planCacheMode = iota
	// genericPlans: cached generic plans. Only single-key calls use them
	// (claimSQL, startSQL, finishSQL over one element): they reach
	// receipts by one key, through the primary key whatever the table's
	// size when the plan was made, and planning them anew cost as much as
	// running them (docs/scaling.md, "The claim statement and its index").
	genericPlans
)

// plansFor is the plan cache mode of a call over n elements: generic plans
// when it is over one key.
func plansFor(n int) planCacheMode {
	if n == 1 {
		return genericPlans
	}
	return customPlans
}

// setGenericPlans and resetPlans switch the plan cache to generic plans
// and back to the connection's setting. Both run in the batch's implicit
// transaction: when it fails, PostgreSQL rolls the SET back with it.
var (
	setGenericPlans = queries.Get("SetGenericPlans")
	resetPlans      = queries.Get("ResetPlans")
)

// sendBatch runs the batch build returns as one implicit transaction (pgx
// sends it in one round trip with a single Sync), its statements with the
// plans of mode, and hands the results to read. It retries when PostgreSQL
// picked the batch as a deadlock victim, which two batches locking
// overlapping keys in different orders can cause.
func (s *Store) sendBatch(ctx context.Context, mode planCacheMode, build func() *pgx.Batch, read func(pgx.BatchResults) error) error {
	generic := mode == genericPlans
	var err error
	for range maxBatchTries {
		err = nil // this try's: a failed try's error must not skip the next one's read
		b := build()
		if generic {
			stmts := make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+2)
			stmts = append(stmts, &pgx.QueuedQuery{SQL: setGenericPlans})
			stmts = append(stmts, b.QueuedQueries...)
			b.QueuedQueries = append(stmts, &pgx.QueuedQuery{SQL: resetPlans})
		}
		br := s.pool.SendBatch(ctx, b)
		if generic {
			if _, err = br.Exec(); err != nil {
				err = fmt.Errorf("set plan_cache_mode: %w", err)
			}
		}
		if err == nil {
			err = read(br)
		}
		if generic && err == nil {
			if _, err = br.Exec(); err != nil {
				err = fmt.Errorf("reset plan_cache_mode: %w", err)
			}
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if !retryable(err) {
			return err
		}
	}
	return err
}

// retryable reports an error after which the whole batch can be run
// again: a conflict (the transaction was rolled back), a failure pgconn
// knows happened before anything reached the server, such as a pooled
// connection whose backend was terminated, or a statement the connection
// prepared before a migration changed the type of a column it returns
// (staleStatement).
func retryable(err error) bool {
	return err != nil && (classOf(err) == ledger.Conflict || pgconn.SafeToRetry(err) || staleStatement(err))
}

func timeOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

func stringOrEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// PinSnapshot stores proposed as what pin fixes if the pin is new, and
// returns the stored values with the week's receipts counted by key id.
func (s *Store) PinSnapshot(ctx context.Context, pin digest.SnapshotPin, proposed digest.WeekPin) (_ digest.WeekPin, err error) {
	defer classify(&err)
	wp := digest.WeekPin{ReceiptsByKeyID: map[string]int64{}}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var from *time.Time
		err := tx.QueryRow(ctx, pinSnapshotSQL, pin.Type, pin.Week.String(), pin.Version,
			proposed.AsOf.UTC().Truncate(time.Microsecond), s.nowUTC(), proposed.Zone, proposed.KeyID, proposed.Partial, proposed.ResentAsNewVersion).
			Scan(&wp.AsOf, &wp.Zone, &wp.KeyID, &wp.Partial, &from, &wp.ResentAsNewVersion)
		if err != nil {
			return err
		}
		wp.RepinnedFrom = timeOrZero(from)
		rows, err := tx.Query(ctx, countByKeyIDSQL, pin.Week.String())
		if err != nil {
			return err
		}
		var (
			kid string
			n   int64
		)
		_, err = pgx.ForEachRow(rows, []any{&kid, &n}, func() error {
			wp.ReceiptsByKeyID[kid] = n
			return nil
		})
		return err
	})
	if err != nil {
		return digest.WeekPin{}, fmt.Errorf("pin snapshot %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
	}
	wp.AsOf = wp.AsOf.UTC()
	return wp, nil
}

// rounds splits elements 0..n-1 into statements so that no key appears
// twice in one statement (ON CONFLICT DO UPDATE cannot touch a row twice,
// and UPDATE … FROM would apply only one of two updates). Elements that
// share a key go to successive statements in their original order, so a
// batch means what the same calls one by one would.
func rounds(n int, keysOf func(i int) []digest.Key) [][]int {
	last := map[digest.Key]int{} // key → round of its latest element
	var out [][]int
	for i := range n {
		r := 0
		for _, k := range keysOf(i) {
			if prev, ok := last[k]; ok && prev+1 > r {
				r = prev + 1
			}
		}
		for _, k := range keysOf(i) {
			last[k] = r
		}
		if r == len(out) {
			out = append(out, nil)
		}
		out[r] = append(out[r], i)
	}
	return out
}

// weekRound is one statement's elements, all of one week: the statements
// on receipts take the week as a constant, so that each reaches the one
// partition of receipts that holds it (see migration 00006).
type weekRound struct {
	week string
	idx  []int
}

// weekRounds groups elements 0..n-1 by week, weeks in order of first
// appearance, and splits each group into rounds. Elements of different
// weeks never share a key (the key determines the week), so the order
// between weeks changes nothing. A run's batch is of one week: one group.
func weekRounds(n int, weekOf func(i int) string, keysOf func(i int) []digest.Key) []weekRound {
	var weeks []string
	groups := map[string][]int{}
	for i := range n {
		w := weekOf(i)
		if _, ok := groups[w]; !ok {
			weeks = append(weeks, w)
		}
		groups[w] = append(groups[w], i)
	}
	var out []weekRound
	for _, w := range weeks {
		g := groups[w]
		for _, r := range rounds(len(g), func(j int) []digest.Key { return keysOf(g[j]) }) {
			idx := make([]int, len(r))
			for j, k := range r {
				idx[j] = g[k]
			}
			out = append(out, weekRound{week: w, idx: idx})
		}
	}
	return out
}
