package smtp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	smtpd "github.com/emersion/go-smtp"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender"
	"github.com/weeklydigest/digest/sender/smtp"
)

func smtpErr(code int) *smtpd.SMTPError {
	return &smtpd.SMTPError{Code: code, EnhancedCode: smtpd.EnhancedCode{code / 100, 0, 0}, Message: "injected"}
}

func TestSendClassifiesFaults(t *testing.T) {
	t.Parallel()
	type tc struct {
		name      string
		fault     fault
		timeout   time.Duration
		want      digest.SendClass
		accepted  bool // Send must succeed
		delivered int  // messages the server stored
	}
	cases := []tc{
		{name: "ok", accepted: true, delivered: 1},
		{name: "550 at RCPT", fault: fault{at: atRcpt, action: reply, err: smtpErr(550)}, want: digest.SendPermanent},
		{name: "550 at MAIL", fault: fault{at: atMail, action: reply, err: smtpErr(550)}, want: digest.SendPermanent},
		{name: "554 at DATA", fault: fault{at: atData, action: reply, err: smtpErr(554)}, want: digest.SendPermanent},
		{name: "drop at MAIL", fault: fault{at: atMail, action: drop}, want: digest.SendTemporary},
		{name: "drop at RCPT", fault: fault{at: atRcpt, action: drop}, want: digest.SendTemporary},
		{name: "drop after data before reply", fault: fault{at: atData, action: drop}, want: digest.SendAmbiguous},
		{name: "slow at MAIL past timeout", fault: fault{at: atMail, action: hang}, timeout: time.Second, want: digest.SendTemporary},
		{name: "slow final reply past timeout", fault: fault{at: atData, action: hang}, timeout: time.Second, want: digest.SendAmbiguous},
		{name: "error after acceptance", fault: fault{at: atReset, action: drop}, accepted: true, delivered: 1},
	}
	for _, code := range []int{421, 451, 452} {
		for _, st := range []struct {
			name string
			at   stage
		}{{"MAIL", atMail}, {"RCPT", atRcpt}, {"DATA", atData}} {
			cases = append(cases, tc{
				name:  fmt.Sprintf("%d at %s", code, st.name),
				fault: fault{at: st.at, action: reply, err: smtpErr(code)},
				want:  digest.SendTemporary,
			})
		}
	}
	// Each case with MAIL, RCPT and DATA pipelined (go-smtp has
	// PIPELINING) and one command at a time (a server without it).
	for _, c := range cases {
		for _, pipelining := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/pipelining=%v", c.name, pipelining), func(t *testing.T) {
				t.Parallel()
				srv := startSMTP(t, c.fault)
				srv.noPipe.Store(!pipelining)
				m := newMailer(t, srv.addr, func(cfg *smtp.Config) {
					if c.timeout > 0 {
						cfg.Timeout = c.timeout
					}
				})
				ref, err := m.Send(ctxT(t), testMessage(testKey("k1", 'a')))
				if c.accepted {
					if err != nil || ref == "" {
						t.Fatalf("Send = %q, %v; want accepted with a reference", ref, err)
					}
				} else {
					var se *digest.SendError
					if !errors.As(err, &se) {
						t.Fatalf("Send error = %v (%T); want *digest.SendError", err, err)
					}
					if strings.Contains(err.Error(), "ada@example.net") {
						t.Errorf("error %q names the recipient", err)
					}
					if se.Class != c.want {
						t.Fatalf("class = %s, want %s (err: %v)", se.Class, c.want, err)
					}
				}
				if got := len(srv.messages()); got != c.delivered {
					t.Fatalf("server stored %d messages, want %d", got, c.delivered)
				}
				wantPipelined(t, srv, pipelining)
			})
		}
	}
}

// wantPipelined fails t unless every MAIL the server read came with its
// RCPT and DATA in one Read (pipelined in one write), or, when pipelined
// is false, every command came alone.
func wantPipelined(t *testing.T, srv *testServer, pipelined bool) {
	t.Helper()
	mails := 0
	for _, verbs := range srv.readTogether() {
		if !pipelined && len(verbs) > 1 {
			t.Fatalf("a server without PIPELINING read %v at once", verbs)
		}
		if pipelined && slices.Contains(verbs, "MAIL") {
			mails++
			if i := slices.Index(verbs, "MAIL"); !slices.Equal(verbs[i:min(i+3, len(verbs))], []string{"MAIL", "RCPT", "DATA"}) {
				t.Fatalf("the server read %v at once; want MAIL, RCPT and DATA together", verbs)
			}
		}
	}
	if pipelined && mails == 0 {
		t.Fatal("the server read no MAIL")
	}
}

// wantChunked fails t unless every MAIL the server read came in one Read
// with its RCPT, its BDAT and the whole chunk (countConn records a chunk
// once its last byte is read, so a Read that ends with BDAT's line has
// not ended with the chunk: the next Read must hold all of it).
func wantChunked(t *testing.T, srv *testServer) {
	t.Helper()
	mails := 0
	for _, verbs := range srv.readTogether() {
		if i := slices.Index(verbs, "MAIL"); i >= 0 {
			mails++
			if !slices.Equal(verbs[i:], []string{"MAIL", "RCPT", "BDAT"}) {
				t.Fatalf("the server read %v at once; want MAIL, RCPT and BDAT together", verbs)
			}
		}
	}
	if mails == 0 {
		t.Fatal("the server read no MAIL")
	}
}

func TestSendConnectionRefusedIsTemporary(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	m := newMailer(t, addr, nil)
	_, err = m.Send(ctxT(t), testMessage(testKey("k1", 'b')))
	if digest.SendClassOf(err) != digest.SendTemporary || !errors.Is(err, smtp.ErrDial) {
		t.Fatalf("Send = %v; want temporary wrapping ErrDial", err)
	}
}

func TestSendReconnectsAfterError(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, fault{at: atMail, action: drop, times: 1})
	m := newMailer(t, srv.addr, nil)
	ctx := ctxT(t)
	if _, err := m.Send(ctx, testMessage(testKey("k1", 'c'))); digest.SendClassOf(err) != digest.SendTemporary {
		t.Fatalf("first Send = %v; want temporary", err)
	}
	if _, err := m.Send(ctx, testMessage(testKey("k1", 'c'))); err != nil {
		t.Fatalf("second Send = %v; want a new connection and success", err)
	}
	if n := len(srv.messages()); n != 1 {
		t.Fatalf("server stored %d, want 1", n)
	}
}

func TestSendRedialsStalePooledConnection(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, fault{})
	m := newMailer(t, srv.addr, nil)
	ctx := ctxT(t)
	if _, err := m.Send(ctx, testMessage(testKey("k1", 'd'))); err != nil {
		t.Fatal(err)
	}
	// The server ends the idle session behind the pool's back.
	srv.closeSessions(t)
	if _, err := m.Send(ctx, testMessage(testKey("k1", 'e'))); err != nil {
		t.Fatalf("Send on a stale connection = %v; want a transparent redial", err)
	}
	if n := len(srv.messages()); n != 2 {
		t.Fatalf("server stored %d, want 2", n)
	}
}

func TestSendInvalidAddressIsPermanent(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, fault{})
	m := newMailer(t, srv.addr, nil)
	for _, to := range []string{"", "no-at-sign", "a@", "@b", "a b@example.com", "a@example.com\r\nBcc: x@evil.test", "<a@example.com>", "Ada <a@example.com>"} {
		msg := testMessage(testKey("k1", 'f'))
		msg.To.Email = to
		_, err := m.Send(ctxT(t), msg)
		if digest.SendClassOf(err) != digest.SendPermanent || !errors.Is(err, sender.ErrInvalidAddress) {
			t.Errorf("Send to %q = %v; want permanent ErrInvalidAddress", to, err)
		}
	}
	if n := len(srv.messages()); n != 0 {
		t.Fatalf("server stored %d, want 0", n)
	}
}

func TestSendCancelledContextIsTemporary(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, fault{})
	m := newMailer(t, srv.addr, nil)
	ctx, cancel := contextWithCancel(t)
	cancel()
	if _, err := m.Send(ctx, testMessage(testKey("k1", '1'))); digest.SendClassOf(err) != digest.SendTemporary {
		t.Fatalf("Send = %v; want temporary", err)
	}
}

// A send whose deadline (the claim's lease) would come before its
// timeouts could end it does not start: the error says so, and the server
// sees no message.
func TestSendRefusesWhenTheDeadlineIsShorterThanTheWorstCase(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, fault{})
	m := newMailer(t, srv.addr, nil) // timeout 2s: a send may take 4s
	if m.WorstCase() != 4*time.Second {
		t.Fatalf("worst case %s, want 4s", m.WorstCase())
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 3*time.Second)
	defer cancel()
	_, err := m.Send(ctx, testMessage(testKey("k1", 'b')))
	if !errors.Is(err, digest.ErrNoTime) || digest.SendClassOf(err) != digest.SendTemporary {
		t.Fatalf("Send = %v; want a temporary ErrNoTime", err)
	}
	if n := len(srv.messages()); n != 0 {
		t.Fatalf("the server stored %d messages", n)
	}
	// With time enough, the same mailer sends.
	ctx2, cancel2 := context.WithTimeout(ctxT(t), 10*time.Second)
	defer cancel2()
	if _, err := m.Send(ctx2, testMessage(testKey("k1", 'b'))); err != nil {
		t.Fatalf("Send with time enough: %v", err)
	}
}
