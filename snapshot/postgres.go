package snapshot

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
)

// Postgres reads the source contract from PostgreSQL: the relations
// digest_customers and digest_activity (tables, or views that operators
// define over their own schema; see docs/design.md for the columns).
//
// digest_customers may have an optional unsubscribed_at column: a customer
// with a non-NULL value is yielded as Suppressed (counted, never sent). A
// relation without it reads as before.
//
// It streams customers in customer_id order, a page at a time (keyset
// pagination, one round trip per page), each with the week's activity
// recorded at or before the snapshot's as_of. Memory is bounded by one page
// whatever the number of customers.
type Postgres struct {
	pool     *pgxpool.Pool
	pageSize int
}

// hasSuppressionSQL tells whether digest_customers (a table or a view, as
// the search path resolves it) has the optional unsubscribed_at column.
const hasSuppressionSQL = `
SELECT EXISTS (
    SELECT 1 FROM pg_attribute
    WHERE attrelid = to_regclass('digest_customers') AND attname = 'unsubscribed_at' AND NOT attisdropped)`

// pageQuery returns pageSQL for the relation as it is: with the optional
// suppression column, or without it (the contract before it existed).
func (s *Postgres) pageQuery(ctx context.Context) (string, error) {
	var has bool
	if err := s.pool.QueryRow(ctx, hasSuppressionSQL).Scan(&has); err != nil {
		return "", err
	}
	if has {
		return strings.Replace(pageSQL, "SUPPRESSED", "unsubscribed_at IS NOT NULL", 1), nil
	}
	return strings.Replace(pageSQL, "SUPPRESSED", "false", 1), nil
}

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

// pageSQL reads one page of customers with their activity in one statement.
// The shard filter is the SQL twin of digest.ShardOf: the first 32 bits of
// md5(customer_id), unsigned, modulo n. The LEFT JOIN keeps customers with
// no activity (rows with a NULL occurred_at), which the caller may skip.
// $8, when not NULL, is the list of customer ids a retry pass reads
// (SourceQuery.Customers): customer_id = ANY uses the primary key.
//
// SUPPRESSED is replaced by the suppression column: "unsubscribed_at IS NOT NULL" when
// digest_customers has the optional unsubscribed_at column, else "false".
const pageSQL = `
WITH page AS (
    SELECT customer_id, email, name, locale, SUPPRESSED AS suppressed
    FROM digest_customers
    WHERE customer_id > $1
      AND ($6::int <= 1 OR (('x' || substr(md5(customer_id), 1, 8))::bit(32)::bigint % $6::int) = $7::int)
      AND ($8::text[] IS NULL OR customer_id = ANY($8::text[]))
    ORDER BY customer_id
    LIMIT $2
)
SELECT p.customer_id, p.email, p.name, p.locale, p.suppressed,
       a.occurred_at, a.recorded_at, a.kind, a.amount_minor, a.currency, a.description
FROM page p
LEFT JOIN digest_activity a
       ON a.customer_id = p.customer_id
      AND a.occurred_at >= $3 AND a.occurred_at < $4
      AND a.recorded_at <= $5
ORDER BY p.customer_id`

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
		query, err := s.pageQuery(ctx)
		if err != nil {
			yield(digest.Record{}, fmt.Errorf("postgres source: %w", err))
			return
		}
		after := ""
		for {
			recs, last, err := s.page(ctx, query, after, from, to, q)
			if err != nil {
				yield(digest.Record{}, fmt.Errorf("postgres source: %w", err))
				return
			}
			for _, r := range recs {
				if !yield(r.rec, r.err) {
					return
				}
			}
			if len(recs) < s.pageSize {
				return
			}
			after = last
		}
	}
}

type pageRecord struct {
	rec digest.Record
	err error
}

type sourceRow struct {
	id                          string
	email, name, locale         *string
	suppressed                  bool
	occurred, recorded          *time.Time
	kind, currency, description *string
	amount                      *int64
}

// pageArgs are pageSQL's arguments for the page after the customer id
// after ("" for the first).
func (s *Postgres) pageArgs(after string, from, to time.Time, q digest.SourceQuery) []any {
	return []any{after, s.pageSize, from, to, q.AsOf, q.Shard.Count, q.Shard.Index, q.Customers}
}

func (s *Postgres) page(ctx context.Context, query, after string, from, to time.Time, q digest.SourceQuery) ([]pageRecord, string, error) {
	rows, err := s.pool.Query(ctx, query, s.pageArgs(after, from, to, q)...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var out []pageRecord
	var r sourceRow
	for rows.Next() {
		if err := rows.Scan(&r.id, &r.email, &r.name, &r.locale, &r.suppressed,
			&r.occurred, &r.recorded, &r.kind, &r.amount, &r.currency, &r.description); err != nil {
			return nil, "", err
		}
		if n := len(out); n == 0 || out[n-1].rec.Customer.ID != r.id {
			out = append(out, pageRecord{rec: digest.Record{Customer: digest.Customer{
				ID: r.id, Email: deref(r.email), Name: deref(r.name), Locale: deref(r.locale), Suppressed: r.suppressed,
			}}})
			if r.email == nil || *r.email == "" {
				out[n].err = &digest.BadRecordError{Where: "digest_customers customer_id=" + r.id, Field: "email", Err: errors.New("is NULL or empty")}
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
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	if len(out) == 0 {
		return nil, "", nil
	}
	return out, out[len(out)-1].rec.Customer.ID, nil
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
	case !digest.ValidCurrency(*r.currency):
		return digest.Activity{}, &columnError{"currency", fmt.Errorf("%q is not an ISO 4217 code", *r.currency)}
	}
	return digest.Activity{
		OccurredAt: *r.occurred, RecordedAt: *r.recorded, Kind: *r.kind,
		AmountMinor: *r.amount, Currency: *r.currency, Description: deref(r.description),
	}, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
