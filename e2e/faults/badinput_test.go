package faults

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/weeklydigest/digest/internal/e2etest"
)

// badInput is one row of docs/bad-input.md: what the user gets wrong, the
// exit code and the message they see. Every row also checks that nothing
// was sent that should not be (Mailpit's count) and that no receipt was
// left sent without a message.
type badInput struct {
	name string
	env  []string // KEY=VALUE; KEY= unsets
	args []string
	code int
	msg  string // substring of stdout+stderr
}

// Configuration and command-line mistakes: each is refused before the
// ledger is touched (exit 2) or, for an unreachable database, before
// anything is claimed (exit 1). One world for all: none may send.
// unsubKeys is an unsubscribe keyring of its own (not e2etest.TestKeyring).
const unsubKeys = "u1:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="

func TestBadInputConfiguration(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	e.Seed(30, week40)
	dir := t.TempDir()
	badLines := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(badLines, []byte(`{"customer_id":"c1","email":"a@example.com","name":"A","locale":"en-GB","activity":[]}
{"customer_id":"c2","email":"not-an-address","name":"B","locale":"en-GB","activity":[]}
{"customer_id":"c3", broken json
`), 0o600); err != nil {
		t.Fatal(err)
	}
	week := []string{"run", "--week", week40s}
	rows := []badInput{
		{"unknown command", nil, []string{"frob"}, 2, `unknown command "frob"`},
		{"unknown flag", nil, append(week, "--frob"), 2, "unknown flag --frob (did you mean --from?)"},
		{"stray argument", nil, append(week, "now"), 2, `unexpected argument "now"`},
		{"week that does not exist", nil, []string{"run", "--week", "2025-W53"}, 2, "ISO year 2025 has weeks W01 to W52"},
		{"week malformed", nil, []string{"run", "--week", "2026W1"}, 2, "want YYYY-Www"},
		{"shard index out of range", nil, append(week, "--shard", "5/2"), 2, `index "5" must be 0 to 1`},
		{"shard /N without JOB_COMPLETION_INDEX", nil, append(week, "--shard", "/4"), 2, "JOB_COMPLETION_INDEX is unset"},
		{"cohort over 100", nil, append(week, "--cohort", "101"), 2, "cohort 101%: want 0 to 100"},
		{"cohort with observe", nil, append(week, "--cohort", "10", "--mode", "observe"), 2, "--cohort goes with --mode enforce"},
		{"ambiguous policy unknown", nil, append(week, "--ambiguous", "maybe"), 2, `ambiguous policy "maybe"`},
		{"mode unknown", nil, append(week, "--mode", "dry"), 2, `mode "dry": want enforce or observe`},
		{"negative deadline", nil, append(week, "--deadline", "-1s"), 2, "want 0 or a positive duration"},
		{"batch size too large", nil, append(week, "--batch-size", "5000"), 2, "batch size 5000"},
		{"lease not a duration", []string{"DIGEST_LEASE=ten"}, week, 2, `DIGEST_LEASE="ten"`},
		{"lease under a second", []string{"DIGEST_LEASE=500ms"}, week, 2, "lease 500ms: at least 1s"},
		{"lease over a day", []string{"DIGEST_LEASE=25h"}, week, 2, "lease 25h0m0s: at most 24h0m0s"},
		{"lease too short for the SMTP timeouts", []string{"DIGEST_LEASE=20s"}, week, 2, "lease 20s is too short for sends that may take 16s"},
		{"SMTP timeout not a duration", []string{"DIGEST_SMTP_TIMEOUT=soon"}, week, 2, `DIGEST_SMTP_TIMEOUT="soon"`},
		{"rate zero", []string{"DIGEST_RATE=0"}, week, 2, `DIGEST_RATE="0"`},
		{"burst not a number", []string{"DIGEST_BURST=many"}, week, 2, `DIGEST_BURST="many"`},
		{"concurrency zero", []string{"DIGEST_CONCURRENCY=0"}, week, 2, `DIGEST_CONCURRENCY="0"`},
		{"time zone unknown", []string{"DIGEST_TZ=Mars/Olympus"}, week, 2, `DIGEST_TZ="Mars/Olympus": not a time zone`},
		{"time zone Local", []string{"DIGEST_TZ=Local"}, week, 2, "DIGEST_TZ=Local: the machine's local zone is not a setting"},
		{"digest type with a separator", []string{"DIGEST_TYPE=weekly|activity"}, week, 2, "invalid run configuration"},
		{"content version with a control character", []string{"DIGEST_VERSION=v1\t"}, week, 2, "invalid run configuration"},
		{"no keyring with PostgreSQL", []string{"DIGEST_HMAC_KEYS="}, week, 2, "no HMAC keyring"},
		{"keyring secret too short", []string{"DIGEST_HMAC_KEYS=k1:c2hvcnQ="}, week, 2, "DIGEST_HMAC_KEYS:"},
		{"keyring not base64", []string{"DIGEST_HMAC_KEYS=k1:%%%"}, week, 2, "DIGEST_HMAC_KEYS:"},
		{"keyring inline and file", []string{"DIGEST_HMAC_KEYS_FILE=" + badLines}, week, 2, "not both"},
		{"keyring file missing", []string{"DIGEST_HMAC_KEYS=", "DIGEST_HMAC_KEYS_FILE=" + filepath.Join(dir, "nope")}, week, 2, "DIGEST_HMAC_KEYS_FILE:"},
		{"SMTP URL scheme", []string{"DIGEST_SMTP_URL=http://mail.example.com"}, week, 2, "DIGEST_SMTP_URL:"},
		{"SMTP URL tls mode", []string{"DIGEST_SMTP_URL=smtp://mail.example.com?tls=sometimes"}, week, 2, "DIGEST_SMTP_URL:"},
		{"PostgreSQL ledger without SMTP URL or outbox", []string{"DIGEST_SMTP_URL="}, week, 2, "no mailer: a PostgreSQL ledger needs DIGEST_SMTP_URL"},
		{"SMTP password file missing", []string{"DIGEST_SMTP_PASSWORD_FILE=" + filepath.Join(dir, "nope")}, week, 2, "DIGEST_SMTP_PASSWORD_FILE:"},
		{"look-up URL scheme", []string{"DIGEST_LOOKUP_URL=ftp://mail.example.com"}, week, 2, "DIGEST_LOOKUP_URL:"},
		{"Postmark look-up without token", []string{"DIGEST_LOOKUP_URL=postmark+https://api.postmarkapp.com"}, week, 2, "needs a server token"},
		{"From not an address", []string{"DIGEST_FROM=digest at bank"}, week, 2, `DIGEST_FROM="digest at bank"`},
		{"unsubscribe URL not https", []string{"DIGEST_UNSUBSCRIBE_URL=http://bank.example/u/{token}", "DIGEST_UNSUBSCRIBE_KEYS=" + unsubKeys}, week, 2, "not an https://host/... or mailto: URL"},
		{"unsubscribe URL without {token}", []string{"DIGEST_UNSUBSCRIBE_URL=https://bank.example/unsubscribe", "DIGEST_UNSUBSCRIBE_KEYS=" + unsubKeys}, week, 2, "has no {token}"},
		{"unsubscribe URL with CRLF", []string{"DIGEST_UNSUBSCRIBE_URL=https://bank.example/u/{token}\r\nBcc: x@evil.test", "DIGEST_UNSUBSCRIBE_KEYS=" + unsubKeys}, week, 2, "control or non-ASCII character"},
		{"unsubscribe URL without keyring", []string{"DIGEST_UNSUBSCRIBE_URL=https://bank.example/u/{token}"}, week, 2, "no unsubscribe keyring"},
		{"unsubscribe keyring not base64", []string{"DIGEST_UNSUBSCRIBE_URL=https://bank.example/u/{token}", "DIGEST_UNSUBSCRIBE_KEYS=u1:%%%"}, week, 2, "DIGEST_UNSUBSCRIBE_KEYS:"},
		{"unsubscribe keyring is the HMAC keyring", []string{"DIGEST_UNSUBSCRIBE_URL=https://bank.example/u/{token}", "DIGEST_UNSUBSCRIBE_KEYS=" + e2etest.TestKeyring}, week, 2, "shares a secret with the HMAC keyring"},
		{"database unreachable", []string{"DIGEST_DATABASE_URL=postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2"}, week, 1, "digest run: "},
		{"database URL malformed", []string{"DIGEST_DATABASE_URL=postgres://%zz"}, week, 2, "DIGEST_DATABASE_URL: not a PostgreSQL URL"},
		{"database URL of another database", []string{"DIGEST_DATABASE_URL=mysql://digest@db/app"}, week, 2, `DIGEST_DATABASE_URL: scheme "mysql" is not supported`},
		{"snapshot file missing", nil, []string{"run", "--week", "2026-W48", "--snapshot", filepath.Join(dir, "nope.jsonl")}, 2, "--snapshot:"},
		{"snapshot file with bad lines", nil, []string{"run", "--week", "2026-W48", "--snapshot", badLines}, 1, "snapshot refused, nothing sent"},
		{"migrate with an argument", nil, []string{"migrate", "now"}, 2, "digest migrate"},
		{"review an unknown key", nil, []string{"review", "show", "k1:00"}, 2, "k1:00"},
	}
	for _, row := range rows {
		r := e.RunEnv(row.env, row.args...)
		out := r.Stdout + r.Stderr
		if r.Code != row.code || !r.Says(row.msg) {
			t.Errorf("%s: exit %d, want %d with %q\n%s", row.name, r.Code, row.code, row.msg, out)
		}
		if strings.Contains(out, "panic:") {
			t.Errorf("%s: panicked\n%s", row.name, out)
		}
	}
	// A malformed address in a snapshot line is quoted by its
	// address_key, never as itself (docs/security.md).
	r := e.Run("run", "--week", "2026-W48", "--snapshot", badLines)
	if out := r.Stdout + r.Stderr; strings.Contains(out, "not-an-address") || !strings.Contains(out, `"address_key":"k1:`) {
		t.Errorf("a bad snapshot line's address: want its address_key and never the address\n%s", out)
	}
	if n := e.MailpitCount(); n != 0 {
		t.Fatalf("bad configuration sent %d messages", n)
	}
	if rc := e.Receipts(); len(rc) != 0 {
		t.Fatalf("bad configuration left receipts: %v", rc)
	}
	t.Logf("NUMBERS bad-input: %d configuration rows, nothing sent, no receipt", len(rows))
}

// Source rows a user's relations can hold that no digest can be built
// from (digest_customers and digest_activity are the operator's views, so
// NULLs are possible even where the demo tables forbid them): the bad
// customer is not claimed, the others are sent, and the run fails (exit 1)
// naming the row; fixed, the next run sends the one left, once. A negative
// amount is a debit: sent.
func TestBadInputSourceRows(t *testing.T) {
	t.Parallel()
	rows := []struct {
		name string
		sql  string
		code int
		msg  string
		// stops: the source cannot read on, so the run sends nothing at
		// all (rather than everybody but the bad customer).
		stops bool
	}{
		{"NULL email", `UPDATE digest_customers SET email = NULL WHERE customer_id = $1`, 1, "could not be built", false},
		{"NULL amount", `UPDATE digest_activity SET amount_minor = NULL WHERE customer_id = $1`, 1, "could not be built", false},
		{"NULL currency", `UPDATE digest_activity SET currency = NULL WHERE customer_id = $1`, 1, "could not be built", false},
		{"unknown currency", `UPDATE digest_activity SET currency = 'XZZ' WHERE customer_id = $1`, 1, "ISO 4217", false},
		{"negative amount", `UPDATE digest_activity SET amount_minor = -amount_minor WHERE customer_id = $1 AND amount_minor > 0`, 0, "run finished", false},
		// The file's address rules, applied to the relations: never
		// claimed (before, claimed and refused by the server: exit 0).
		{"display name in email", `UPDATE digest_customers SET email = 'Jane Roe <' || email || '>' WHERE customer_id = $1`, 1, "could not be built", false},
		{"space in email", `UPDATE digest_customers SET email = replace(email, '@', ' @') WHERE customer_id = $1`, 1, "could not be built", false},
		{"bad locale", `UPDATE digest_customers SET locale = 'en_GB' WHERE customer_id = $1`, 1, "not a BCP 47", false},
		{"bad kind", `UPDATE digest_activity SET kind = 'Card Payment' WHERE customer_id = $1`, 1, "not a kind", false},
		{"lower-case currency", `UPDATE digest_activity SET currency = 'eur' WHERE customer_id = $1`, 1, "ISO 4217", false},
	}
	for _, row := range rows {
		t.Run(strings.ReplaceAll(row.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			e := e2etest.NewEnv(t)
			want := e.Seed(20, week40)
			ctx := context.Background()
			for _, q := range []string{
				`ALTER TABLE digest_customers ALTER COLUMN email DROP NOT NULL`,
				`ALTER TABLE digest_activity ALTER COLUMN amount_minor DROP NOT NULL`,
				`ALTER TABLE digest_activity ALTER COLUMN currency DROP NOT NULL`,
			} {
				if _, err := e.Pool.Exec(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			var victim, email string
			if err := e.Pool.QueryRow(ctx, `SELECT a.customer_id, c.email FROM digest_activity a JOIN digest_customers c USING (customer_id)
				WHERE occurred_at >= '2026-09-28' AND occurred_at < '2026-10-05' AND amount_minor > 0 ORDER BY customer_id LIMIT 1`).Scan(&victim, &email); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Pool.Exec(ctx, row.sql, victim); err != nil {
				t.Fatal(err)
			}
			r := e.Run("run", "--week", week40s)
			out := r.Stdout + r.Stderr
			if r.Code != row.code || !r.Says(row.msg) {
				t.Fatalf("exit %d, want %d with %q\n%s", r.Code, row.code, row.msg, out)
			}
			// No address in any log record, the malformed one included.
			for a := range want {
				if strings.Contains(out, a) {
					t.Errorf("the run's output holds the address %s:\n%s", a, out)
				}
			}
			if strings.Contains(row.name, "email") && row.name != "NULL email" && !strings.Contains(out, `"address_key":"k1:`) {
				t.Errorf("the malformed address is not quoted by its address_key:\n%s", out)
			}
			if row.code == 0 {
				e.AssertExactlyOnce(want)
				return
			}
			others := map[string]bool{}
			for a := range want {
				others[a] = a != email && !row.stops
			}
			for a, ok := range others {
				if !ok {
					delete(others, a)
				}
			}
			e.AssertExactlyOnce(others)
			// Fixed, the one left goes out, once.
			if _, err := e.Pool.Exec(ctx, `UPDATE digest_customers SET email = $2 WHERE customer_id = $1`, victim, email); err != nil {
				t.Fatal(err)
			}
			// The fixed rows are altered rows: the victim was never
			// claimed, so there is no fingerprint to differ from.
			if _, err := e.Pool.Exec(ctx, `UPDATE digest_activity SET amount_minor = coalesce(amount_minor, 100), currency = 'EUR',
				kind = replace(kind, 'Card Payment', 'card_payment') WHERE customer_id = $1`, victim); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Pool.Exec(ctx, `UPDATE digest_customers SET locale = replace(locale, 'en_GB', 'en-GB') WHERE customer_id = $1`, victim); err != nil {
				t.Fatal(err)
			}
			again := e.Run("run", "--week", week40s)
			if again.Code != 0 {
				t.Fatalf("after the fix: exit %d\n%s", again.Code, again.Stderr)
			}
			e.AssertExactlyOnce(want)
		})
	}
}

// replySMTP is a go-smtp server that answers every RCPT TO with one reply.
func replySMTP(t *testing.T, code int, enhanced smtp.EnhancedCode, text string) (addr string, rcpts *atomic.Int64) {
	t.Helper()
	rcpts = &atomic.Int64{}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &replySession{err: &smtp.SMTPError{Code: code, EnhancedCode: enhanced, Message: text}, rcpts: rcpts}, nil
	}))
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String(), rcpts
}

type replySession struct {
	err   error
	rcpts *atomic.Int64
}

func (s *replySession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *replySession) Rcpt(string, *smtp.RcptOptions) error {
	s.rcpts.Add(1)
	return s.err
}
func (s *replySession) Data(r io.Reader) error {
	_, _ = io.Copy(io.Discard, r)
	return errors.New("not reached")
}
func (s *replySession) Reset()        {}
func (s *replySession) Logout() error { return nil }

// SMTP replies: a permanent refusal (550) marks the digest failed, never
// retried (the run counts it as settled: exit 0, a warning per key and
// "failed" in the summary); a temporary one (421/451) leaves
// it retryable for the next run (exit 3). Neither is held or resent. Only
// the 421 (the server refuses everyone for now) counts as throttling; a
// 451 to a recipient (greylisting) does not.
func TestBadInputSMTPReplies(t *testing.T) {
	t.Parallel()
	rows := []struct {
		name      string
		code      int
		enhanced  smtp.EnhancedCode
		exit      int
		state     string
		throttled bool
	}{
		{"550 mailbox unavailable", 550, smtp.EnhancedCode{5, 1, 1}, 0, "failed", false},
		{"451 try again later", 451, smtp.EnhancedCode{4, 3, 0}, 3, "retryable", false},
		{"421 too many connections, slow down", 421, smtp.EnhancedCode{4, 7, 0}, 3, "retryable", true},
	}
	for _, row := range rows {
		t.Run(strings.Fields(row.name)[0], func(t *testing.T) {
			t.Parallel()
			e := e2etest.NewEnv(t)
			want := e.Seed(10, week40)
			addr, rcpts := replySMTP(t, row.code, row.enhanced, "customer0000001@example.com: "+row.name)
			r := e.RunEnv([]string{"DIGEST_SMTP_URL=smtp://" + addr + "?tls=none"}, "run", "--week", week40s, "--deadline", "0")
			if r.Code != row.exit {
				t.Fatalf("exit %d, want %d\n%s", r.Code, row.exit, r.Stderr)
			}
			if rc := e.Receipts(); rc[row.state] != len(want) || len(rc) != 1 {
				t.Fatalf("receipts %v, want all %d %s", rc, len(want), row.state)
			}
			var leaked int
			if err := e.Pool.QueryRow(context.Background(), `SELECT count(*) FROM receipts WHERE last_error LIKE '%@example.com%'`).Scan(&leaked); err != nil {
				t.Fatal(err)
			}
			if leaked != 0 {
				t.Fatalf("%d receipts store the server's text with a customer address", leaked)
			}
			// A 421 closes the session: the mailer may try the message
			// once more at once on a new connection.
			if n := int(rcpts.Load()); n != len(want) && (row.code != 421 || n < len(want) || n > 2*len(want)) {
				t.Fatalf("server saw %d RCPT, want one per digest (%d)", rcpts.Load(), len(want))
			}
			throttled := 0
			if row.throttled {
				throttled = len(want)
			}
			if got := r.Count(t, "throttled"); got != throttled {
				t.Fatalf("summary throttled %d, want %d\n%s", got, throttled, r.Stderr)
			}
			if got := r.Count(t, "retryable"); row.state == "retryable" && got != len(want) {
				t.Fatalf("summary retryable %d, want the %d rows left retryable\n%s", got, len(want), r.Stderr)
			}
		})
	}
}
