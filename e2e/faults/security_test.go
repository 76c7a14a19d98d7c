package faults

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/internal/e2etest"
	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/snapshot"
)

// ledgerTables are the tables "digest migrate" creates for the ledger.
var ledgerTables = []string{"receipts", "receipt_events", "snapshot_pins", "observations", "prune_tombstones", "week_runs", "run_ends", "week_expectations", "week_state_counts"}

// After sending, observing and quarantining a week, no text column of any
// ledger table holds a seeded customer id, email address or name: the
// ledger stores keyed hashes, never the readable identity.
func TestLedgerHoldsNoCustomerData(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	const n = 120
	e.Seed(n, week40)
	e.MustRun("run", "--week", week40s)
	e.MustRun("run", "--week", week40s, "--mode", "observe")
	// A quarantine and a failed send write their reasons too.
	ctx := context.Background()
	if _, err := e.Pool.Exec(ctx, `UPDATE digest_activity SET amount_minor = amount_minor + 1
		WHERE ctid = (SELECT ctid FROM digest_activity ORDER BY customer_id LIMIT 1)`); err != nil {
		t.Fatal(err)
	}
	if r := e.Run("run", "--week", week40s); r.Code != 4 {
		t.Fatalf("altered row: exit %d, want 4\n%s", r.Code, r.Stderr)
	}

	var needles []string
	for r := range snapshot.Synthetic(n, week40, 1) {
		needles = append(needles, r.Customer.ID, r.Customer.Email, r.Customer.Name)
	}
	rows, err := e.Pool.Query(ctx, `SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = ANY($1)
		AND data_type IN ('text', 'character varying', 'character', 'json', 'jsonb')
		ORDER BY table_name, column_name`, ledgerTables)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var c [2]string
		return c, r.Scan(&c[0], &c[1])
	})
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string]bool{}
	var rowsChecked int64
	for _, c := range cols {
		tables[c[0]] = true
		ident := pgx.Identifier{c[0]}.Sanitize() + "." + pgx.Identifier{c[1]}.Sanitize()
		var hits int
		var sample *string
		q := fmt.Sprintf(`SELECT count(*), min(%[1]s::text) FROM %[2]s, unnest($1::text[]) AS v(s)
			WHERE strpos(%[1]s::text, v.s) > 0`, ident, pgx.Identifier{c[0]}.Sanitize())
		if err := e.Pool.QueryRow(ctx, q, needles).Scan(&hits, &sample); err != nil {
			t.Fatal(err)
		}
		if hits > 0 {
			t.Errorf("%s holds customer data (%d hits), e.g. %q", ident, hits, *sample)
		}
		var rowsIn int64
		if err := e.Pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{c[0]}.Sanitize()).Scan(&rowsIn); err != nil {
			t.Fatal(err)
		}
		rowsChecked += rowsIn
	}
	for _, tb := range ledgerTables {
		if !tables[tb] {
			t.Errorf("ledger table %s has no text column or does not exist", tb)
		}
	}
	t.Logf("NUMBERS no-customer-data: %d text columns of %d tables, %d rows, %d needles", len(cols), len(tables), rowsChecked, len(needles))
}

// runtimeRole creates a PostgreSQL role with a password and the grants the
// job needs at run time (docs/security.md), dropped when the test ends.
func runtimeRole(t *testing.T, e *e2etest.Env) (name, password string) {
	t.Helper()
	ctx := context.Background()
	name = fmt.Sprintf("digest_rt_%x", rand.Uint32())
	password = fmt.Sprintf("pw-%x-%x", rand.Uint64(), rand.Uint64())
	var schema string
	if err := e.Pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	s := pgx.Identifier{schema}.Sanitize()
	r := pgx.Identifier{name}.Sanitize()
	stmts := []string{
		"CREATE ROLE " + r + " LOGIN PASSWORD '" + password + "'",
		"GRANT USAGE ON SCHEMA " + s + " TO " + r,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON " + s + ".receipts, " + s + ".receipt_events, " + s + ".snapshot_pins, " + s + ".observations, " +
			s + ".prune_tombstones, " + s + ".week_runs, " + s + ".run_ends, " + s + ".suppressions, " + s + ".suppression_events, " + s + ".week_expectations, " + s + ".week_state_counts, " +
			s + ".provider_events, " + s + ".provider_watermarks, " + s + ".soft_bounces TO " + r,
		"GRANT USAGE ON ALL SEQUENCES IN SCHEMA " + s + " TO " + r,
		"GRANT SELECT ON " + s + ".digest_customers, " + s + ".digest_activity TO " + r,
	}
	for _, q := range stmts {
		if _, err := e.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", strings.Replace(q, password, "***", 1), err)
		}
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), pgtest.BaseURL())
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		for _, q := range []string{"DROP OWNED BY " + r, "DROP ROLE " + r} {
			if _, err := conn.Exec(context.Background(), q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	return name, password
}

// The job runs under a role with only the documented run-time grants (the
// schema was migrated by its owner), at debug level, with a database
// password in the URL, an SMTP password from a file and the HMAC key in
// the environment: it sends the week, and no log line of this run, nor of
// a run whose database is unreachable, shows any of the secrets.
func TestRestrictedRoleAndNoSecretInDebugLogs(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t) // migrated by the owner
	want := e.Seed(60, week40)
	role, dbPassword := runtimeRole(t, e)
	u, err := url.Parse(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, dbPassword)
	smtpPassword := fmt.Sprintf("smtp-%x", rand.Uint64())
	pwFile := filepath.Join(t.TempDir(), "smtp-password")
	if err := os.WriteFile(pwFile, []byte(smtpPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secret, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(e2etest.TestKeyring, "k1:"))
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{
		"database password":         dbPassword,
		"database password (url)":   url.QueryEscape(dbPassword),
		"SMTP password":             smtpPassword,
		"HMAC key (base64)":         strings.TrimPrefix(e2etest.TestKeyring, "k1:"),
		"HMAC key (hex)":            hex.EncodeToString(secret),
		"HMAC key (base64, half)":   strings.TrimPrefix(e2etest.TestKeyring, "k1:")[:22],
		"HMAC key (raw, printable)": string(secret[16:]),
	}
	delete(secrets, "HMAC key (raw, printable)") // 0x10…0x1f are control bytes: not a meaningful probe
	vars := []string{
		"DIGEST_DATABASE_URL=" + u.String(),
		"DIGEST_SMTP_URL=smtp://digest@" + e.Mailpit.SMTPAddr() + "?tls=none&auth=plain",
		"DIGEST_SMTP_PASSWORD_FILE=" + pwFile,
		"DIGEST_LOG_LEVEL=debug",
	}
	run := e.RunEnv(vars, "run", "--week", week40s)
	if run.Code != 0 {
		t.Fatalf("run under the restricted role: exit %d\n%s", run.Code, run.Stderr)
	}
	e.AssertExactlyOnce(want)
	status := e.RunEnv(vars, "status", "--week", week40s)
	review := e.RunEnv(vars, "review", "list")
	// Prune locks week_runs: the run-time grants must allow it.
	if _, err := e.Pool.Exec(context.Background(), `UPDATE week_runs SET last_started_at = last_started_at - interval '100 days';
		UPDATE receipts SET updated_at = updated_at - interval '100 days'`); err != nil {
		t.Fatal(err)
	}
	if prune := e.RunEnv(vars, "prune", "--older-than", "90d"); prune.Code != 0 || !strings.Contains(prune.Stdout, fmt.Sprintf("pruned %d receipts", len(want))) {
		t.Fatalf("prune under the restricted role: exit %d\n%s%s", prune.Code, prune.Stdout, prune.Stderr)
	}

	// The same secrets against a database that does not answer.
	dead := *u
	dead.Host = "127.0.0.1:1"
	down := e.RunEnv(append(vars, "DIGEST_DATABASE_URL="+dead.String()), "run", "--week", week40s)
	if down.Code != 1 {
		t.Fatalf("unreachable database: exit %d, want 1\n%s", down.Code, down.Stderr)
	}
	// A migrate attempt by the run-time role must fail: it owns nothing.
	mig := e.RunEnv(vars, "migrate")

	lines := 0
	for name, r := range map[string]e2etest.Result{"run": run, "status": status, "review": review, "unreachable": down, "migrate": mig} {
		out := r.Stdout + r.Stderr
		lines += strings.Count(out, "\n")
		for what, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s output shows the %s:\n%s", name, what, out)
			}
		}
	}
	t.Logf("NUMBERS secrets: %d log lines at debug level checked for %d secrets; role %s sent %d; migrate as that role: exit %d",
		lines, len(secrets), role, run.Count(t, "sent"), mig.Code)
}

// STARTTLS is mandatory by default: against a server that offers no TLS
// (Mailpit here) no retry can help, so the run says so, naming STARTTLS,
// and exits 2 within seconds, before it has pinned or claimed anything;
// nothing reaches the server.
func TestSTARTTLSMandatoryByDefault(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	e.Seed(20, week40)
	start := time.Now()
	r := e.RunEnv([]string{"DIGEST_SMTP_URL=smtp://" + e.Mailpit.SMTPAddr()}, "run", "--week", week40s, "--deadline", "40s")
	t.Logf("NUMBERS starttls: exit %d after %s, %d log lines", r.Code, time.Since(start).Round(time.Millisecond), strings.Count(r.Stderr, "\n"))
	if r.Code != 2 || !strings.Contains(r.Stderr, "does not support STARTTLS") || !strings.Contains(r.Stderr, "nothing claimed") {
		t.Fatalf("plain-text server with default tls: exit %d; want 2 naming STARTTLS, nothing claimed\n%s", r.Code, r.Stderr)
	}
	if rc := e.Receipts(); len(rc) != 0 {
		t.Fatalf("receipts %v: want none", rc)
	}
	var pins int
	if err := e.Pool.QueryRow(context.Background(), `SELECT count(*) FROM snapshot_pins`).Scan(&pins); err != nil || pins != 0 {
		t.Fatalf("%d week pins (%v): want none", pins, err)
	}
	if n := e.MailpitCount(); n != 0 {
		t.Fatalf("%d messages went out over plain text", n)
	}
}

// Customer text reaches the message escaped: markup in a name or an
// activity description is text in the HTML part, and a CR/LF in them
// cannot start a header. Checked in the raw message Mailpit stored.
func TestCustomerTextEscapedAndNoHeaderInjection(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	e.Seed(1, week40) // creates the source tables
	ctx := context.Background()
	if _, err := e.Pool.Exec(ctx, `TRUNCATE digest_customers, digest_activity`); err != nil {
		t.Fatal(err)
	}
	const (
		name = "Eve <script>alert(1)</script>\r\nBcc: bcc-victim@evil.example"
		desc = "<img src=x onerror=alert(2)>\r\nX-Injected: yes\r\n\r\n<b>body</b>"
	)
	occurred := week40.Start(time.UTC).Add(30 * time.Hour)
	e.UsesAddresses("eve@example.com", "bcc-victim@evil.example")
	if _, err := e.Pool.Exec(ctx, `INSERT INTO digest_customers VALUES ('cust_evil', 'eve@example.com', $1, 'en-GB', '2026-01-01')`, name); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pool.Exec(ctx, `INSERT INTO digest_activity VALUES ('cust_evil', $1, $2, 'card_payment', -1234, 'EUR', $3)`,
		occurred, occurred.Add(time.Second), desc); err != nil {
		t.Fatal(err)
	}
	r := e.Run("run", "--week", week40s)
	if r.Code != 0 || r.Count(t, "sent") != 1 {
		t.Fatalf("exit %d, %v\n%s", r.Code, r.Summary(t), r.Stderr)
	}
	msgs, err := e.Mailpit.Messages(ctx)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("messages: %v, %v", msgs, err)
	}
	raw, err := e.Mailpit.Raw(ctx, msgs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(raw), "\r\n\r\n")
	for _, h := range strings.Split(head, "\r\n") {
		l := strings.ToLower(h)
		if strings.HasPrefix(l, "bcc:") || strings.HasPrefix(l, "x-injected:") {
			t.Errorf("customer text added a header: %q", h)
		}
	}
	got, err := e.Mailpit.Recipients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "eve@example.com" {
		t.Fatalf("recipients %v, want only eve@example.com", got)
	}
	html := decodedHTML(t, e, msgs[0].ID)
	for _, bad := range []string{"<script>", "<img src=x", "<b>body</b>"} {
		if strings.Contains(html, bad) {
			t.Errorf("HTML part holds customer markup unescaped: %q", bad)
		}
	}
	if !strings.Contains(html, "&lt;img src=x onerror=alert(2)&gt;") && !strings.Contains(html, "&lt;img src=x onerror=alert(2)>") {
		t.Errorf("HTML part does not show the description as escaped text:\n%s", html)
	}
}

// decodedHTML returns the HTML part of a message as Mailpit decoded it.
func decodedHTML(t *testing.T, e *e2etest.Env, id string) string {
	t.Helper()
	var m struct {
		HTML string `json:"HTML"`
	}
	if err := e.Mailpit.GetJSON(context.Background(), "/api/v1/message/"+url.PathEscape(id), &m); err != nil {
		t.Fatal(err)
	}
	return m.HTML
}
