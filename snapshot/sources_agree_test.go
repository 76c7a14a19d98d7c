package snapshot_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/snapshot"
)

// sourceCase is one customer with one activity row, as both sources can
// hold it: a line of the file, rows of the relations.
type sourceCase struct {
	name                  string
	id, email, nm, locale string
	kind, currency, desc  string
	field, want           string // the bad field (its last path element) and what the error says; "" for a good record
}

// badRecordCases are the bad-record cases of the file source (TestBadLines)
// whose values a PostgreSQL text or bigint column can hold. Invalid UTF-8
// and NUL cannot be stored in a text column of a UTF-8 database, and a
// bigint is an integer by type: those cases are the file's alone.
var badRecordCases = []sourceCase{
	{name: "good", field: ""},
	{name: "display name", email: "Jane Roe <jane.roe@corp.example>", field: "email", want: "not a bare email address"},
	{name: "address with a space", email: "jane roe@corp.example", field: "email", want: "not a bare email address"},
	{name: "quoted local part with a space", email: `"jane roe"@corp.example`, field: "email", want: "not a bare email address"},
	{name: "not an address", email: "nobody", field: "email", want: "not a bare email address"},
	{name: "two addresses", email: "a@corp.example, b@corp.example", field: "email", want: "not a bare email address"},
	{name: "customer_id with a separator", id: "cust_b|x", field: "customer_id", want: "contains '|'"},
	{name: "customer_id with white space", id: "cust_b ", field: "customer_id", want: "white space"},
	{name: "locale with underscore", locale: "en_GB", field: "locale", want: "not a BCP 47"},
	{name: "kind with spaces", kind: "Card Payment", field: "kind", want: "not a kind"},
	{name: "lower-case currency", currency: "eur", field: "currency", want: "not an ISO 4217"},
	{name: "unknown currency", currency: "XZZ", field: "currency", want: "not an ISO 4217"},
}

func (c sourceCase) filled() sourceCase {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.id, "cust_b")
	def(&c.email, "b@corp.example")
	def(&c.nm, "Zoë")
	def(&c.locale, "de-DE")
	def(&c.kind, "card_payment")
	def(&c.currency, "EUR")
	def(&c.desc, "Café")
	return c
}

var agreeOccurred = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

// record is c as a digest.Record.
func (c sourceCase) record() digest.Record {
	return digest.Record{
		Customer: digest.Customer{ID: c.id, Email: c.email, Name: c.nm, Locale: c.locale},
		Activity: []digest.Activity{{OccurredAt: agreeOccurred, RecordedAt: agreeOccurred, Kind: c.kind, AmountMinor: -450, Currency: c.currency, Description: c.desc}},
	}
}

// fileRecord reads c through a JSON Lines file.
func (c sourceCase) fileRecord(t *testing.T) (digest.Record, *digest.BadRecordError) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := snapshot.WriteJSONL(&buf, slices.Values([]digest.Record{c.record()})); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "snap.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := snapshot.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return one(t, f)
}

// postgresRecord reads c through the PostgreSQL relations.
func (c sourceCase) postgresRecord(t *testing.T, pool *pgxpool.Pool) (digest.Record, *digest.BadRecordError) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO digest_customers (customer_id, email, name, locale) VALUES ($1, $2, $3, $4)`,
		c.id, c.email, c.nm, c.locale); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO digest_activity VALUES ($1, $2, $2, $3, -450, $4, $5)`,
		c.id, agreeOccurred, c.kind, c.currency, c.desc); err != nil {
		t.Fatal(err)
	}
	return one(t, snapshot.NewPostgres(pool, 0))
}

// one reads the source's only record, or its only bad record.
func one(t *testing.T, src digest.Source) (digest.Record, *digest.BadRecordError) {
	t.Helper()
	q := digest.SourceQuery{Week: pgWeek, Location: time.UTC, AsOf: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	recs, errs := collect(t, src, q)
	var bads []*digest.BadRecordError
	for _, err := range errs {
		be, _ := errors.AsType[*digest.BadRecordError](err)
		bads = append(bads, be)
	}
	switch {
	case len(recs) == 1 && len(bads) == 0:
		return recs[0], nil
	case len(recs) == 0 && len(bads) == 1:
		return digest.Record{}, bads[0]
	}
	t.Fatalf("got %d records and %d bad ones, want one", len(recs), len(bads))
	return digest.Record{}, nil
}

// Every bad-record case of the file source a PostgreSQL row can hold is a
// bad record of the PostgreSQL source too, for the same field and reason;
// and no error quotes the malformed address.
func TestSourcesRefuseTheSameRecords(t *testing.T) {
	t.Parallel()
	for _, tc := range badRecordCases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			c := tc.filled()
			pool, err := pgxpool.New(context.Background(), pgtest.Schema(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			if _, _, err := snapshot.Seed(context.Background(), pool, slices.Values([]digest.Record(nil))); err != nil {
				t.Fatal(err)
			}
			fileRec, fileBad := c.fileRecord(t)
			pgRec, pgBad := c.postgresRecord(t, pool)
			if c.field == "" {
				if fileBad != nil || pgBad != nil {
					t.Fatalf("good record refused: file %v, postgres %v", fileBad, pgBad)
				}
				if fileRec.Customer != pgRec.Customer || len(fileRec.Activity) != 1 || len(pgRec.Activity) != 1 {
					t.Fatalf("file %+v, postgres %+v", fileRec, pgRec)
				}
				return
			}
			for src, bad := range map[string]*digest.BadRecordError{"file": fileBad, "postgres": pgBad} {
				if bad == nil {
					t.Errorf("%s source: the record was read, want it refused in %s", src, c.field)
					continue
				}
				field := bad.Field[strings.LastIndex(bad.Field, ".")+1:]
				if field != c.field || !strings.Contains(bad.Err.Error(), c.want) {
					t.Errorf("%s source: bad %q: %v, want field %q saying %q", src, bad.Field, bad.Err, c.field, c.want)
				}
				if c.field == "email" && strings.Contains(bad.Error(), c.email) {
					t.Errorf("%s source: the error quotes the address: %v", src, bad)
				}
			}
			if fileBad != nil && pgBad != nil && fileBad.Err.Error() != pgBad.Err.Error() {
				t.Errorf("the sources say it differently: file %q, postgres %q", fileBad.Err, pgBad.Err)
			}
		})
	}
}
