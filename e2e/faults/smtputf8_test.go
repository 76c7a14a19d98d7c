package faults

import (
	"context"
	"io"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/e2etest"
)

// utf8SMTP is a strict go-smtp server: without SMTPUTF8 it refuses a
// recipient with a non-ASCII local part (553 5.6.7, RFC 6531); it records
// each accepted RCPT and whether its MAIL carried SMTPUTF8.
type utf8SMTP struct {
	addr  string
	mu    sync.Mutex
	rcpts map[string]int
	utf8  map[string]bool
}

func startUTF8SMTP(t *testing.T, offer bool) *utf8SMTP {
	t.Helper()
	s := &utf8SMTP{rcpts: map[string]int{}, utf8: map[string]bool{}}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &utf8SMTPSession{s: s, offer: offer}, nil
	}))
	srv.Domain = "localhost"
	srv.EnableSMTPUTF8 = offer
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

type utf8SMTPSession struct {
	s        *utf8SMTP
	offer    bool
	mailUTF8 bool
	to       []string
}

func (ss *utf8SMTPSession) Mail(_ string, o *smtp.MailOptions) error {
	ss.mailUTF8 = o != nil && o.UTF8
	return nil
}

func (ss *utf8SMTPSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if !ss.offer && !digest.ASCIILocalPart(to) {
		return &smtp.SMTPError{Code: 553, EnhancedCode: smtp.EnhancedCode{5, 6, 7}, Message: "non-ASCII addresses are not permitted"}
	}
	ss.to = append(ss.to, to)
	return nil
}

func (ss *utf8SMTPSession) Data(r io.Reader) error {
	_, _ = io.Copy(io.Discard, r)
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	for _, a := range ss.to {
		ss.s.rcpts[a]++
		ss.s.utf8[a] = ss.mailUTF8
	}
	return nil
}

func (ss *utf8SMTPSession) Reset()        { ss.to, ss.mailUTF8 = nil, false }
func (ss *utf8SMTPSession) Logout() error { return nil }

// An address with a non-ASCII local part on a server without SMTPUTF8 is
// a bad record: never claimed, counted as invalid, named by its
// address_key, the run exits 1 and the others go. Before, it was claimed,
// refused at RCPT and counted failed with exit 0. On a server offering
// SMTPUTF8 the next run sends it, with MAIL's SMTPUTF8 parameter.
func TestNonASCIILocalPartNeedsSMTPUTF8(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(20, week40)
	e.Unset("DIGEST_LOOKUP_URL")
	ctx := context.Background()
	var victim, email string
	if err := e.Pool.QueryRow(ctx, `SELECT a.customer_id, c.email FROM digest_activity a JOIN digest_customers c USING (customer_id)
		WHERE occurred_at >= '2026-09-28' AND occurred_at < '2026-10-05' ORDER BY customer_id LIMIT 1`).Scan(&victim, &email); err != nil {
		t.Fatal(err)
	}
	jorg := strings.Replace(email, "customer", "jörg", 1)
	e.UsesAddresses(jorg)
	if _, err := e.Pool.Exec(ctx, `UPDATE digest_customers SET email = $2 WHERE customer_id = $1`, victim, jorg); err != nil {
		t.Fatal(err)
	}
	delete(want, email)
	want[jorg] = true

	strict := startUTF8SMTP(t, false)
	r := e.RunEnv([]string{"DIGEST_SMTP_URL=smtp://" + strict.addr + "?tls=none"}, "run", "--week", week40s, "--deadline", "0")
	out := r.Stdout + r.Stderr
	if r.Code != 1 || !r.Says("could not be built") || !strings.Contains(out, "SMTPUTF8") {
		t.Fatalf("without SMTPUTF8: exit %d, want 1 naming SMTPUTF8\n%s", r.Code, out)
	}
	if got := r.Count(t, "invalid"); got != 1 {
		t.Fatalf("summary invalid %d, want 1\n%s", got, r.Stderr)
	}
	if strings.Contains(out, "jörg") || !strings.Contains(out, `"address_key":"k1:`) {
		t.Fatalf("the address is not named by its address_key alone:\n%s", out)
	}
	if rc := e.Receipts(); rc["sent"] != len(want)-1 || len(rc) != 1 {
		t.Fatalf("receipts %v, want the %d others sent and none for the refused address", rc, len(want)-1)
	}
	strict.mu.Lock()
	if len(strict.rcpts) != len(want)-1 || strict.rcpts[jorg] != 0 {
		t.Fatalf("the strict server took %d recipients (%s: %d), want the %d others", len(strict.rcpts), jorg, strict.rcpts[jorg], len(want)-1)
	}
	strict.mu.Unlock()
	// status does not call the week complete: one digest remains.
	if st := e.Run("status", "--week", week40s); !regexp.MustCompile(`(?m)^remaining\s+1$`).MatchString(st.Stdout) {
		t.Fatalf("status after the refusal does not show the digest remaining:\n%s", st.Stdout)
	}

	intl := startUTF8SMTP(t, true)
	again := e.RunEnv([]string{"DIGEST_SMTP_URL=smtp://" + intl.addr + "?tls=none"}, "run", "--week", week40s, "--deadline", "0")
	if again.Code != 0 {
		t.Fatalf("with SMTPUTF8: exit %d\n%s", again.Code, again.Stderr)
	}
	intl.mu.Lock()
	defer intl.mu.Unlock()
	if intl.rcpts[jorg] != 1 || !intl.utf8[jorg] || len(intl.rcpts) != 1 {
		t.Fatalf("the SMTPUTF8 server took %v (SMTPUTF8 %v), want %s once with SMTPUTF8", intl.rcpts, intl.utf8, jorg)
	}
	if rc := e.Receipts(); rc["sent"] != len(want) || len(rc) != 1 {
		t.Fatalf("receipts %v, want all %d sent", rc, len(want))
	}
	t.Logf("NUMBERS smtputf8: wanted=%d first run: sent=%d invalid=%d exit=%d; with SMTPUTF8: sent=%d",
		len(want), r.Count(t, "sent"), r.Count(t, "invalid"), r.Code, again.Count(t, "sent"))
}
