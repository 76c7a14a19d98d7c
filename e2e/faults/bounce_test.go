package faults

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/e2etest"
)

// Bounces are traceable: a server refusing some recipients with 550 (its
// reply naming the address, as servers' do) makes each failure one log
// record at the shipped info level with its address_key, stores the key
// on the failed receipt, and puts no address in clear in any log line or
// receipt; the runbook's bounce → suppression SQL, run as written on
// PostgreSQL, suppresses exactly those customers.
func TestPermanentFailuresTraceableToSuppression(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(40, week40)
	emails := make([]string, 0, len(want))
	for a := range want {
		emails = append(emails, a)
	}
	slices.Sort(emails)
	refused := map[string]bool{}
	for i, a := range emails {
		if i%3 == 0 {
			refused[strings.ToLower(a)] = true
		}
	}
	kr, err := digest.ParseKeyring(e2etest.TestKeyring)
	if err != nil {
		t.Fatal(err)
	}
	wantKeys := map[string]bool{}
	for a := range refused {
		wantKeys[kr.AddressKey(a)] = true
	}
	addr, accepted := refusingSMTP(t, refused)

	r := e.RunEnv([]string{"DIGEST_SMTP_URL=smtp://" + addr + "?tls=none"}, "run", "--week", week40s, "--deadline", "0")
	if r.Code != 0 || r.Count(t, "failed") != len(refused) || r.Count(t, "sent") != len(want)-len(refused) {
		t.Fatalf("exit %d, %v; want 0 with %d failed and %d sent\n%s", r.Code, r.Summary(t), len(refused), len(want)-len(refused), r.Stderr)
	}
	if int(accepted.Load()) != len(want)-len(refused) {
		t.Fatalf("server accepted %d messages, want %d", accepted.Load(), len(want)-len(refused))
	}

	// The log: one record per permanent failure, each with its address key.
	logged := map[string]int{}
	lower := strings.ToLower(r.Stderr)
	for a := range want {
		if strings.Contains(lower, strings.ToLower(a)) {
			t.Errorf("the log shows the address %s", a)
		}
	}
	for _, line := range strings.Split(r.Stderr, "\n") {
		var rec struct {
			Level, Msg string
			AddressKey string `json:"address_key"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || !strings.HasPrefix(rec.Msg, "send failed permanently") {
			continue
		}
		if rec.Level != "WARN" || !wantKeys[rec.AddressKey] {
			t.Errorf("permanent failure record %s: want WARN with a refused address's key", line)
		}
		logged[rec.AddressKey]++
	}
	if len(logged) != len(refused) {
		t.Fatalf("%d of %d permanent failures logged with their address_key (%v)\n%s", len(logged), len(refused), logged, r.Stderr)
	}

	// The receipts: the key kept, no address.
	ctx := context.Background()
	rows, _ := e.Pool.Query(ctx, `SELECT key, coalesce(address_key, ''), coalesce(last_error, '') FROM receipts WHERE state = 'failed'`)
	stored, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Receipt, Key, Err string }])
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stored {
		if !wantKeys[s.Key] || strings.Contains(s.Err, "@") {
			t.Errorf("failed receipt: address key %q, last error %q; want a refused address's key and no address", s.Key, s.Err)
		}
	}
	if len(stored) != len(refused) {
		t.Fatalf("%d failed receipts, want %d", len(stored), len(refused))
	}
	if show := e.MustRun("review", "show", stored[0].Receipt); !strings.Contains(show.Stdout, "address key") || !strings.Contains(show.Stdout, stored[0].Key) {
		t.Errorf("review show of a failed receipt lacks its address key %s:\n%s", stored[0].Key, show.Stdout)
	}
	list := e.MustRun("review", "list", "--state", "failed", "--week", week40s)
	for k := range wantKeys {
		if !strings.Contains(list.Stdout, k) {
			t.Errorf("review list --state failed lacks the address key %s:\n%s", k, list.Stdout)
		}
	}

	// The runbook's SQL, as written, with its placeholders filled in.
	runbookSuppression(t, e, refused)
}

// runbookSuppression runs the bounce → suppression SQL of
// docs/operations.md on e's database and checks it suppressed exactly the
// customers whose address was refused.
func runbookSuppression(t *testing.T, e *e2etest.Env, refused map[string]bool) {
	t.Helper()
	ctx := context.Background()
	doc, err := os.ReadFile(filepath.Join(e2etest.RepoRoot(), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, bounces, ok := strings.Cut(string(doc), "**Bounces.**")
	m := regexp.MustCompile("(?s)```sql\n(.*?)```").FindStringSubmatch(bounces)
	if !ok || m == nil {
		t.Fatal("docs/operations.md has no SQL block under **Bounces.**")
	}
	secret := strings.TrimPrefix(e2etest.TestKeyring, "k1:")
	stmt := strings.NewReplacer("'WEEK'", "'"+week40s+"'", "'KID:'", "'k1:'", "'SECRET'", "'"+secret+"'").Replace(m[1])
	if stmt == m[1] {
		t.Fatalf("the runbook's SQL has none of the placeholders WEEK, KID, SECRET:\n%s", m[1])
	}

	// What the runbook asks for first: pgcrypto in the database (public,
	// so it outlives this test's schema), and the suppression column.
	_, err = e.Pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pgcrypto SCHEMA public`)
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && (pgErr.Code == "23505" || pgErr.Code == "42710")) { // made meanwhile by another test
		t.Fatal(err)
	}
	if _, err := e.Pool.Exec(ctx, `ALTER TABLE digest_customers ADD COLUMN unsubscribed_at timestamptz`); err != nil {
		t.Fatal(err)
	}
	conn, err := e.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT set_config('search_path', current_schema() || ', public', false)`); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, stmt)
	if err != nil {
		t.Fatalf("the runbook's suppression SQL fails: %v\n%s", err, stmt)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("the runbook's suppression SQL fails: %v\n%s", err, stmt)
	}
	rows, _ = conn.Query(ctx, `SELECT customer_id, lower(email), unsubscribed_at IS NOT NULL FROM digest_customers ORDER BY customer_id`)
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		ID, Email  string
		Suppressed bool
	}])
	if err != nil {
		t.Fatal(err)
	}
	var wantIDs []string
	for _, c := range all {
		if c.Suppressed != refused[c.Email] {
			t.Errorf("customer %s: suppressed %v, want %v", c.ID, c.Suppressed, refused[c.Email])
		}
		if refused[c.Email] {
			wantIDs = append(wantIDs, c.ID)
		}
	}
	slices.Sort(ids)
	if !slices.Equal(ids, wantIDs) {
		t.Errorf("the SQL returned %v, want %v", ids, wantIDs)
	}
}

// refusingSMTP is a go-smtp server that refuses RCPT TO of the addresses
// in refused (lower case) with a 550 naming the address, and accepts the
// others' messages, counting them.
func refusingSMTP(t *testing.T, refused map[string]bool) (addr string, accepted *atomic.Int64) {
	t.Helper()
	accepted = &atomic.Int64{}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &refusingSession{refused: refused, accepted: accepted}, nil
	}))
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String(), accepted
}

type refusingSession struct {
	refused  map[string]bool
	accepted *atomic.Int64
}

func (s *refusingSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *refusingSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.refused[strings.ToLower(to)] {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "<" + to + ">: mailbox unavailable"}
	}
	return nil
}
func (s *refusingSession) Data(r io.Reader) error {
	_, _ = io.Copy(io.Discard, r)
	s.accepted.Add(1)
	return nil
}
func (s *refusingSession) Reset()        {}
func (s *refusingSession) Logout() error { return nil }
