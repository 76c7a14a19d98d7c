package snapshot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
)

// Postgres reads the source contract from PostgreSQL: the relations
// digest_customers and digest_activity (tables, or views that operators
// define over their own schema; see docs/design.md for the columns).
//
// digest_customers may have an optional unsubscribed_at column: a customer
// with a non-NULL value is yielded as Suppressed (counted, never sent); and
// an optional time_zone column (text, an IANA zone, NULL for none): the
// zone the customer's rows are shown in. A relation without them reads as
// before.
//
// It streams customers in customer_id order, a page at a time (keyset
// pagination, one round trip per page; two for one shard of several), each
// with the week's activity recorded at or before the snapshot's as_of.
// Memory is bounded by one page whatever the number of customers. Each
// page's plan is the same with fresh statistics or none (see pageSQL).
type Postgres struct {
	pool     *pgxpool.Pool
	pageSize int

	logger   *slog.Logger // nil: slog.Default()
	warnOnce sync.Once    // the missing index is said once per source
}

// SetLogger sets where the source says what an operator should fix (a
// missing index); the default is slog.Default().
func (s *Postgres) SetLogger(l *slog.Logger) { s.logger = l }

// relationSQL tells how the relations are: whether digest_customers (a
// table or a view, as the search path resolves it) has the optional
// unsubscribed_at column, and whether digest_activity is a table (plain or
// partitioned) without an index whose leading column is customer_id, the
// index the source contract asks for (docs/design.md). A view's indexes
// are its tables': a view is taken to follow the contract.
const relationSQL = `
SELECT EXISTS (
           SELECT 1 FROM pg_attribute
           WHERE attrelid = to_regclass('digest_customers') AND attname = 'unsubscribed_at' AND NOT attisdropped),
       EXISTS (
           SELECT 1 FROM pg_attribute
           WHERE attrelid = to_regclass('digest_customers') AND attname = 'time_zone' AND NOT attisdropped),
       COALESCE((
           SELECT c.relkind IN ('r', 'p') AND NOT EXISTS (
                      SELECT 1 FROM pg_index i
                      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                      WHERE i.indrelid = c.oid AND a.attname = 'customer_id')
           FROM pg_class c WHERE c.oid = to_regclass('digest_activity')), false)`

var _ digest.Source = (*Postgres)(nil)

// DefaultPageSize is the number of customers read per round trip.
const DefaultPageSize = 1000

// NewPostgres returns a source reading through pool. pageSize 0 means
// DefaultPageSize.
func NewPostgres(pool *pgxpool.Pool, pageSize int) *Postgres {
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	return &Postgres{pool: pool, pageSize: pageSize}
}

// The page statement is built from parts, one text per kind of read, so
// that each text's plan, custom or generic (pgx prepares and caches the
// statement; after five executions PostgreSQL may keep a generic plan), has
// only the predicates of its read and no "$n IS NULL OR" branch a generic
// plan could not fold away.
//
// pageSQL reads one page of customers with their week's activity: the
// customers by primary key in customer_id order, then, for each, a probe of
// digest_activity for its rows in [$3, $4) recorded at or before $5. The
// probe is a LATERAL subquery kept apart from the customers by OFFSET 0 (an
// optimization fence: the planner cannot pull it up into a join), so the
// only plan is a nested loop probing digest_activity per customer, through
// the (customer_id, occurred_at) index of the source contract. A plain join
// let the planner choose by estimates: without statistics a merge join
// sorting the whole week's activity on disk for every page, with them a
// hash join over a sequential scan of it for the first pages, both
// proportional to the table and not the page. The LEFT JOIN keeps
// customers with no activity (one row with a NULL occurred_at), which the
// caller may skip.
//
// CUSTOMERS is the customers' predicate after "customer_id > $1",
// SUPPRESSED the suppression column: "unsubscribed_at IS NOT NULL" when
// digest_customers has the optional unsubscribed_at column, else "false",
// TIMEZONE the optional time_zone column ("time_zone::text", else "NULL::text"),
// and ACTIVITY the activity's part: probeActivity, or joinActivity when
// digest_activity is a table that lacks the index the probe needs.
const pageSQL = `
SELECT c.customer_id, c.email, c.name, c.locale, c.suppressed, c.time_zone,
       a.occurred_at, a.recorded_at, a.kind, a.amount_minor, a.currency, a.description
FROM (
    SELECT customer_id, email, name, locale, SUPPRESSED AS suppressed, TIMEZONE AS time_zone
    FROM digest_customers
    WHERE customer_id > $1 CUSTOMERS
    ORDER BY customer_id
    LIMIT $2
) c
ACTIVITY
ORDER BY c.customer_id`

// probeActivity is the page's activity as a probe per customer (see
// pageSQL).
const probeActivity = `LEFT JOIN LATERAL (
    SELECT occurred_at, recorded_at, kind, amount_minor, currency, description
    FROM digest_activity
    WHERE customer_id = c.customer_id
      AND occurred_at >= $3 AND occurred_at < $4
      AND recorded_at <= $5
    OFFSET 0
) a ON true`

// joinActivity is the page's activity as a join the planner may turn into
// a hash or merge join: what a digest_activity table without an index
// led by customer_id is read with, where a probe per customer would scan
// the whole table for each one (a week of a million customers would never
// end). Records are the same; only the plan differs.
const joinActivity = `LEFT JOIN digest_activity a
       ON a.customer_id = c.customer_id
      AND a.occurred_at >= $3 AND a.occurred_at < $4
      AND a.recorded_at <= $5`

// shardSQL is the SQL twin of digest.ShardOf, with the shard count and
// index as parameters $%d and $%d: the first 32 bits of md5(customer_id),
// unsigned, modulo n. md5 is most of its cost.
const shardSQL = `AND ('x' || left(md5(customer_id), 8))::bit(32)::bigint %% $%d::int = $%d::int`

// windowSQL finds where a shard's window of customers ends: the last of
// the next $2 customers in customer_id order, and how many there are. A
// page of one shard of n reads the customers of such a window, n times its
// page size, and keeps those of the shard. Filtering with LIMIT instead
// leaves the planner to guess how many customers it must scan to find a
// page of one shard, and it guesses 1 in 200 (there are no statistics for
// the hash): with few enough customers it reads and sorts the whole table
// for every page.
const windowSQL = `
SELECT max(customer_id), count(*)
FROM (SELECT customer_id FROM digest_customers WHERE customer_id > $1 ORDER BY customer_id LIMIT $2) w`

// read is one kind of read: its page statement, the arguments after the
// first five, and how a page is bounded.
type read struct {
	sql   string
	extra []any
	// window is how many customers a page of one shard spans (see
	// windowSQL; the window's last customer id is the statement's last
	// argument), 0 for a read bounded by the page size.
	window int
	// custom: plan every page for its arguments (an unnamed statement),
	// never with a generic plan, which for one shard guesses one customer
	// a page and would scan an unindexed digest_activity once per customer.
	custom bool
}

// plan returns the read of q for the relation as it is: with the optional
// suppression column or without it (the contract before it existed).
func (s *Postgres) plan(ctx context.Context, q digest.SourceQuery) (read, error) {
	var has, hasZone, unindexed bool
	if err := s.pool.QueryRow(ctx, relationSQL).Scan(&has, &hasZone, &unindexed); err != nil {
		return read{}, err
	}
	suppressed := "false"
	if has {
		suppressed = "unsubscribed_at IS NOT NULL"
	}
	timeZone := "NULL::text"
	if hasZone {
		timeZone = "time_zone::text"
	}
	var rd read
	activity := probeActivity
	if unindexed {
		activity, rd.custom = joinActivity, true
		s.warnOnce.Do(func() {
			cmp.Or(s.logger, slog.Default()).Warn("digest_activity has no index led by customer_id: each page joins the week's activity, " +
				"a cost that grows with the table; create the index of the source contract (docs/design.md): " +
				"CREATE INDEX ON digest_activity (customer_id, occurred_at)")
		})
	}
	customers := ""
	switch {
	case q.Customers != nil:
		// A retry pass: the primary key finds the listed customers.
		customers, rd.extra = "AND customer_id = ANY($6::text[])", []any{q.Customers}
		if q.Shard.Count > 1 {
			customers += " " + fmt.Sprintf(shardSQL, 7, 8)
			rd.extra = append(rd.extra, q.Shard.Count, q.Shard.Index)
		}
	case q.Shard.Count > 1:
		// One shard's customers of the window ending at $8.
		customers = fmt.Sprintf(shardSQL, 6, 7) + " AND customer_id <= $8::text"
		rd.extra, rd.window = []any{q.Shard.Count, q.Shard.Index}, s.pageSize*q.Shard.Count
	}
	rd.sql = strings.NewReplacer("SUPPRESSED", suppressed, "TIMEZONE", timeZone, "CUSTOMERS", customers, "ACTIVITY", activity).Replace(pageSQL)
	return rd, nil
}

// Records streams the week's customers of q.Shard with the activity
// recorded at or before q.AsOf. A row that breaks the contract (a NULL in a
// required column, an unknown currency) yields a *digest.BadRecordError for
// its customer, and the stream goes on.
func (s *Postgres) Records(ctx context.Context, q digest.SourceQuery) iter.Seq2[digest.Record, error] {
	return func(yield func(digest.Record, error) bool) {
		if q.AsOf.IsZero() {
			yield(digest.Record{}, errors.New("postgres source: the snapshot's as_of is not pinned"))
			return
		}
		loc := q.Location
		if loc == nil {
			loc = time.UTC
		}
		from, to := q.Week.Start(loc), q.Week.End(loc)
		rd, err := s.plan(ctx, q)
		if err != nil {
			yield(digest.Record{}, fmt.Errorf("postgres source: %w", err))
			return
		}
		after := ""
		for {
			recs, next, more, err := s.next(ctx, rd, after, from, to, q)
			if err != nil {
				yield(digest.Record{}, fmt.Errorf("postgres source: %w", err))
				return
			}
			for _, r := range recs {
				if !yield(r.rec, r.err) {
					return
				}
			}
			if !more {
				return
			}
			after = next
		}
	}
}

// next reads the page after the customer id after: its records, the
// customer id the following page starts after, and whether there may be
// one.
func (s *Postgres) next(ctx context.Context, rd read, after string, from, to time.Time, q digest.SourceQuery) ([]pageRecord, string, bool, error) {
	args := append([]any{after, s.pageSize, from, to, q.AsOf}, rd.extra...)
	if rd.window == 0 {
		recs, err := s.page(ctx, rd, args)
		if err != nil || len(recs) < s.pageSize {
			return recs, "", false, err
		}
		return recs, recs[len(recs)-1].rec.Customer.ID, true, nil
	}
	var end *string
	var n int
	if err := s.pool.QueryRow(ctx, windowSQL, after, rd.window).Scan(&end, &n); err != nil {
		return nil, "", false, err
	}
	if end == nil {
		return nil, "", false, nil
	}
	args[1] = rd.window // a bound the window already keeps
	recs, err := s.page(ctx, rd, append(args, *end))
	return recs, *end, err == nil && n == rd.window, err
}

type pageRecord struct {
	rec digest.Record
	err error
}

type sourceRow struct {
	id                          string
	email, name, locale         *string
	suppressed                  bool
	timeZone                    *string
	occurred, recorded          *time.Time
	kind, currency, description *string
	amount                      *int64
}

// page runs a page statement and gathers its rows into records.
func (s *Postgres) page(ctx context.Context, rd read, args []any) ([]pageRecord, error) {
	if rd.custom {
		args = append([]any{pgx.QueryExecModeExec}, args...)
	}
	rows, err := s.pool.Query(ctx, rd.sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []pageRecord
	var r sourceRow
	for rows.Next() {
		if err := rows.Scan(&r.id, &r.email, &r.name, &r.locale, &r.suppressed, &r.timeZone,
			&r.occurred, &r.recorded, &r.kind, &r.amount, &r.currency, &r.description); err != nil {
			return nil, err
		}
		if n := len(out); n == 0 || out[n-1].rec.Customer.ID != r.id {
			out = append(out, pageRecord{rec: digest.Record{Customer: digest.Customer{
				ID: r.id, Email: deref(r.email), Name: deref(r.name), Locale: deref(r.locale), Suppressed: r.suppressed, TimeZone: deref(r.timeZone),
			}}})
			// The file's rules (digest.CheckCustomer): an address with a
			// display name or a space is a bad record here too, never
			// claimed and refused at the server.
			if r.email == nil || *r.email == "" {
				out[n].err = &digest.BadRecordError{Where: "digest_customers customer_id=" + r.id, Field: "email", Err: errors.New("is NULL or empty")}
			} else if ferr := digest.CheckCustomer(out[n].rec.Customer); ferr != nil {
				out[n].err = &digest.BadRecordError{Where: "digest_customers customer_id=" + r.id, Field: ferr.Field, Err: ferr.Err}
			}
		}
		cur := &out[len(out)-1]
		if r.occurred == nil || cur.err != nil {
			continue // no activity in the week, or the customer is already bad
		}
		a, err := r.activity()
		if err != nil {
			cur.err = &digest.BadRecordError{Where: "digest_activity customer_id=" + r.id, Field: err.field, Err: err.err}
			continue
		}
		cur.rec.Activity = append(cur.rec.Activity, a)
	}
	return out, rows.Err()
}

type columnError struct {
	field string
	err   error
}

var errSQLNull = errors.New("is NULL")

func (r *sourceRow) activity() (digest.Activity, *columnError) {
	switch {
	case r.recorded == nil:
		return digest.Activity{}, &columnError{"recorded_at", errSQLNull}
	case r.kind == nil || *r.kind == "":
		return digest.Activity{}, &columnError{"kind", errors.New("is NULL or empty")}
	case r.amount == nil:
		return digest.Activity{}, &columnError{"amount_minor", errSQLNull}
	case r.currency == nil:
		return digest.Activity{}, &columnError{"currency", errSQLNull}
	}
	a := digest.Activity{
		OccurredAt: *r.occurred, RecordedAt: *r.recorded, Kind: *r.kind,
		AmountMinor: *r.amount, Currency: *r.currency, Description: deref(r.description),
	}
	if ferr := digest.CheckActivity(a); ferr != nil {
		return digest.Activity{}, &columnError{ferr.Field, ferr.Err}
	}
	return a, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
