package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
)

// Synthetic yields n deterministic demo customers, customer ids in
// ascending order ("cust_0000001"…), each with a unique email and 0 to 6
// activity rows in week (about one customer in ten has none), recorded a
// few seconds after they occurred. The same (n, week, seed) always yields
// the same records.
func Synthetic(n int, week digest.ISOWeek, seed uint64) iter.Seq[digest.Record] {
	return SyntheticUntil(n, week, seed, time.Time{})
}

// SyntheticUntil is Synthetic without the activity recorded after until
// (zero: none left out): "digest seed" of a week not yet over writes only
// what has happened by now, as a real source would hold, never a row
// recorded in the future. The rows kept are Synthetic's.
func SyntheticUntil(n int, week digest.ISOWeek, seed uint64, until time.Time) iter.Seq[digest.Record] {
	first := []string{"Ada", "Björn", "Chloé", "Dmitri", "Eun-ji", "Fatima", "Giulia", "Hiro", "Ingrid", "José", "Kwame", "Łucja", "Mateo", "Nadia", "Oğuz", "Priya"}
	last := []string{"Okafor", "Schmidt", "Dubois", "Ivanova", "Kim", "Haddad", "Rossi", "Tanaka", "Larsen", "García", "Mensah", "Nowak", "Silva", "Rahman", "Yılmaz", "Patel"}
	locales := []string{"en-GB", "de-DE", "fr-FR", "es-ES", "ja-JP", "en-US"}
	currencies := []string{"EUR", "EUR", "EUR", "GBP", "USD", "CHF", "JPY", "BHD"}
	kinds := []struct {
		kind, desc string
		sign       int64
	}{
		{"card_payment", "Card payment at Corner Shop", -1},
		{"card_payment", "Card payment at Café Central", -1},
		{"transfer_in", "Transfer from savings", 1},
		{"transfer_out", "Rent", -1},
		{"fee", "Monthly account fee", -1},
		{"interest", "Interest", 1},
		{"refund", "Refund: online order", 1},
	}
	start := week.Start(time.UTC)
	return func(yield func(digest.Record) bool) {
		rng := rand.New(rand.NewPCG(seed, 0x6469676573740a))
		for i := range n {
			id := fmt.Sprintf("cust_%07d", i+1)
			rec := digest.Record{Customer: digest.Customer{
				ID:     id,
				Email:  fmt.Sprintf("customer%07d@example.com", i+1),
				Name:   first[rng.IntN(len(first))] + " " + last[rng.IntN(len(last))],
				Locale: locales[rng.IntN(len(locales))],
			}}
			rows := 0
			if rng.IntN(10) > 0 {
				rows = 1 + rng.IntN(6)
			}
			for range rows {
				k := kinds[rng.IntN(len(kinds))]
				occurred := start.Add(time.Duration(rng.Int64N(int64(7*24*time.Hour))) / time.Second * time.Second)
				a := digest.Activity{
					OccurredAt:  occurred,
					RecordedAt:  occurred.Add(time.Duration(1+rng.IntN(30)) * time.Second),
					Kind:        k.kind,
					AmountMinor: k.sign * (100 + rng.Int64N(250_000)),
					Currency:    currencies[rng.IntN(len(currencies))],
					Description: k.desc,
				}
				if until.IsZero() || !a.RecordedAt.After(until) {
					rec.Activity = append(rec.Activity, a)
				}
			}
			if !yield(rec) {
				return
			}
		}
	}
}

// WriteJSONL writes records as a JSON Lines snapshot in the format File
// reads. Records must come in ascending customer id order.
func WriteJSONL(w io.Writer, records iter.Seq[digest.Record]) (int, error) {
	type activity struct {
		OccurredAt  time.Time `json:"occurred_at"`
		RecordedAt  time.Time `json:"recorded_at"`
		Kind        string    `json:"kind"`
		AmountMinor int64     `json:"amount_minor"`
		Currency    string    `json:"currency"`
		Description string    `json:"description,omitempty"`
	}
	type line struct {
		CustomerID string     `json:"customer_id"`
		Email      string     `json:"email"`
		Name       string     `json:"name,omitempty"`
		Locale     string     `json:"locale,omitempty"`
		Activity   []activity `json:"activity,omitempty"`
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	n := 0
	for r := range records {
		l := line{CustomerID: r.Customer.ID, Email: r.Customer.Email, Name: r.Customer.Name, Locale: r.Customer.Locale}
		for _, a := range r.Activity {
			l.Activity = append(l.Activity, activity(a))
		}
		if err := enc.Encode(l); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// SchemaSQL creates the demo source tables of the source contract when
// they are absent. In production, operators define digest_customers and
// digest_activity as views over their own schema instead.
const SchemaSQL = `
CREATE TABLE IF NOT EXISTS digest_customers (
    customer_id text PRIMARY KEY,
    email       text NOT NULL,
    name        text,
    locale      text,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS digest_activity (
    customer_id  text        NOT NULL,
    occurred_at  timestamptz NOT NULL,
    recorded_at  timestamptz NOT NULL,
    kind         text        NOT NULL,
    amount_minor bigint      NOT NULL,
    currency     text        NOT NULL,
    description  text
);
-- The source probes each customer's week of activity through this index
-- (docs/design.md, source contract).
CREATE INDEX IF NOT EXISTS digest_activity_customer_occurred
    ON digest_activity (customer_id, occurred_at);`

// Seed creates the demo tables if absent and loads records with COPY,
// streaming (constant memory). It returns how many customers it read and
// how many activity rows it added.
//
// Into tables that already hold customers (a demo of several weeks) it
// adds what is new: customers already present are kept as they are, and an
// activity row identical to one present (same customer, time, kind, amount
// and currency) is not added again, so seeding the same week twice changes
// nothing. That path stages the records in temporary tables first; empty
// tables are loaded directly.
//
// Either way it ends with ANALYZE of both tables, so that what a run
// plans against them is planned on what they hold rather than on what
// autovacuum has yet to see. The source read's page statement keeps its
// plan without statistics (TestPostgresSourcePlanWithoutStatistics).
func Seed(ctx context.Context, pool *pgxpool.Pool, records iter.Seq[digest.Record]) (customers, rows int64, err error) {
	customers, rows, err = load(ctx, pool, records)
	if err != nil {
		return customers, rows, err
	}
	if _, err := pool.Exec(ctx, `ANALYZE digest_customers, digest_activity`); err != nil {
		return customers, rows, fmt.Errorf("analyze the seeded tables: %w", err)
	}
	return customers, rows, nil
}

func load(ctx context.Context, pool *pgxpool.Pool, records iter.Seq[digest.Record]) (customers, rows int64, err error) {
	if _, err := pool.Exec(ctx, SchemaSQL); err != nil {
		return 0, 0, fmt.Errorf("create demo tables: %w", err)
	}
	var loaded bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM digest_customers)`).Scan(&loaded); err != nil {
		return 0, 0, fmt.Errorf("seed: %w", err)
	}
	if !loaded {
		return copyRecords(ctx, pool, "digest_customers", "digest_activity", records)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
CREATE TEMP TABLE seed_customers (customer_id text, email text, name text, locale text) ON COMMIT DROP;
CREATE TEMP TABLE seed_activity (LIKE digest_activity) ON COMMIT DROP;`)
		if err != nil {
			return err
		}
		if customers, _, err = copyRecords(ctx, tx, "seed_customers", "seed_activity", records); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO digest_customers (customer_id, email, name, locale)
SELECT customer_id, email, name, locale FROM seed_customers ON CONFLICT (customer_id) DO NOTHING`)
		if err != nil {
			return fmt.Errorf("add customers: %w", err)
		}
		tag, err := tx.Exec(ctx, `INSERT INTO digest_activity (customer_id, occurred_at, recorded_at, kind, amount_minor, currency, description)
SELECT s.customer_id, s.occurred_at, s.recorded_at, s.kind, s.amount_minor, s.currency, s.description
FROM seed_activity s
WHERE NOT EXISTS (SELECT 1 FROM digest_activity a WHERE a.customer_id = s.customer_id
    AND a.occurred_at = s.occurred_at AND a.kind = s.kind AND a.amount_minor = s.amount_minor AND a.currency = s.currency)`)
		if err != nil {
			return fmt.Errorf("add activity: %w", err)
		}
		rows = tag.RowsAffected()
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("seed into loaded tables: %w", err)
	}
	return customers, rows, nil
}

// copier is a pool or a transaction.
type copier interface {
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
}

// copyRecords loads records into a customers and an activity table with
// COPY.
func copyRecords(ctx context.Context, db copier, customerTable, activityTable string, records iter.Seq[digest.Record]) (customers, rows int64, err error) {
	// Two COPY streams cannot share one pass over records without holding
	// them; activity is re-derived from the same deterministic sequence.
	customers, err = db.CopyFrom(ctx, pgx.Identifier{customerTable},
		[]string{"customer_id", "email", "name", "locale"},
		copySource(records, func(r digest.Record, emit func([]any)) {
			emit([]any{r.Customer.ID, r.Customer.Email, r.Customer.Name, r.Customer.Locale})
		}))
	if err != nil {
		return 0, 0, fmt.Errorf("copy %s: %w", customerTable, err)
	}
	rows, err = db.CopyFrom(ctx, pgx.Identifier{activityTable},
		[]string{"customer_id", "occurred_at", "recorded_at", "kind", "amount_minor", "currency", "description"},
		copySource(records, func(r digest.Record, emit func([]any)) {
			for _, a := range r.Activity {
				emit([]any{r.Customer.ID, a.OccurredAt, a.RecordedAt, a.Kind, a.AmountMinor, a.Currency, a.Description})
			}
		}))
	if err != nil {
		return customers, 0, fmt.Errorf("copy %s: %w", activityTable, err)
	}
	return customers, rows, nil
}

// copySource adapts an iterator to pgx.CopyFromSource, pulling one record
// at a time.
func copySource(records iter.Seq[digest.Record], rowsOf func(digest.Record, func([]any))) pgx.CopyFromSource {
	next, stop := iter.Pull(records)
	s := &pullSource{next: next, stop: stop, rowsOf: rowsOf}
	return s
}

type pullSource struct {
	next    func() (digest.Record, bool)
	stop    func()
	rowsOf  func(digest.Record, func([]any))
	pending [][]any
	cur     []any
}

func (s *pullSource) Next() bool {
	for len(s.pending) == 0 {
		r, ok := s.next()
		if !ok {
			s.stop()
			return false
		}
		s.rowsOf(r, func(v []any) { s.pending = append(s.pending, v) })
	}
	s.cur, s.pending = s.pending[0], s.pending[1:]
	return true
}

func (s *pullSource) Values() ([]any, error) { return s.cur, nil }
func (s *pullSource) Err() error             { return nil }
