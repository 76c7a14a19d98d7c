package smtp_test

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	smtpd "github.com/emersion/go-smtp"
)

// utf8Server is a go-smtp server that offers SMTPUTF8 or not and records
// each transaction's MAIL SMTPUTF8 parameter, recipients and content.
type utf8Server struct {
	addr string
	mu   sync.Mutex
	utf8 []bool
	rcpt []string
	data []string
}

func startUTF8Server(t *testing.T, offer bool) *utf8Server {
	t.Helper()
	s := &utf8Server{}
	srv := smtpd.NewServer(smtpd.BackendFunc(func(*smtpd.Conn) (smtpd.Session, error) { return &utf8Session{s: s}, nil }))
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

type utf8Session struct{ s *utf8Server }

func (ss *utf8Session) Mail(_ string, o *smtpd.MailOptions) error {
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	ss.s.utf8 = append(ss.s.utf8, o != nil && o.UTF8)
	return nil
}

func (ss *utf8Session) Rcpt(to string, _ *smtpd.RcptOptions) error {
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	ss.s.rcpt = append(ss.s.rcpt, to)
	return nil
}

func (ss *utf8Session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	ss.s.data = append(ss.s.data, string(b))
	return err
}

func (ss *utf8Session) Reset()        {}
func (ss *utf8Session) Logout() error { return nil }

// The mailer tells whether its server offers SMTPUTF8, from the EHLO of
// the connection it then sends on; with SMTPUTF8 offered, an address with
// a non-ASCII local part goes with MAIL's SMTPUTF8 parameter, as it is in
// RCPT TO and the To header (RFC 6531, 6532).
func TestSMTPUTF8OfferedOrNot(t *testing.T) {
	t.Parallel()
	without := startUTF8Server(t, false)
	m := newMailer(t, without.addr, nil)
	if ok, err := m.SMTPUTF8(ctxT(t)); err != nil || ok {
		t.Fatalf("SMTPUTF8 on a server without it = %v, %v; want false", ok, err)
	}

	with := startUTF8Server(t, true)
	m = newMailer(t, with.addr, nil)
	if ok, err := m.SMTPUTF8(ctxT(t)); err != nil || !ok {
		t.Fatalf("SMTPUTF8 on a server offering it = %v, %v; want true", ok, err)
	}
	msg := testMessage(testKey("k1", 'e'))
	msg.To.Email = "jörg@example.net"
	if _, err := m.Send(ctxT(t), msg); err != nil {
		t.Fatalf("Send = %v", err)
	}
	with.mu.Lock()
	defer with.mu.Unlock()
	if len(with.utf8) != 1 || !with.utf8[0] || len(with.rcpt) != 1 || with.rcpt[0] != "jörg@example.net" {
		t.Fatalf("the server saw MAIL SMTPUTF8 %v, RCPT %q; want true and jörg@example.net", with.utf8, with.rcpt)
	}
	if !strings.Contains(with.data[0], "jörg@example.net") {
		t.Fatalf("the To header does not carry the address:\n%s", with.data[0])
	}

	// A dead server is an error, never an answer.
	dead := newMailer(t, "127.0.0.1:1", nil)
	if ok, err := dead.SMTPUTF8(ctxT(t)); err == nil {
		t.Fatalf("SMTPUTF8 on no server = %v, nil; want an error", ok)
	}
}
