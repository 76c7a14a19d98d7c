package smtp_test

import (
	"strings"
	"testing"
)

// An internationalized domain goes to a server without SMTPUTF8 in its
// A-label form (IDNA2008), in RCPT TO and in the To header: raw UTF-8
// there is refused by a strict server, or mangled.
func TestSendInternationalizedDomainAsALabel(t *testing.T) {
	t.Parallel()
	rcpt, content := make(chan string, 1), make(chan string, 1)
	srv := startRawSMTP(t, []string{"PIPELINING", "8BITMIME"}, func(_ int, s *rawSession) {
		_ = s.line() // MAIL
		rcpt <- s.line()
		_ = s.line() // DATA
		s.write("250 ok\r\n250 ok\r\n354 go ahead\r\n")
		content <- s.content()
		s.write("250 2.0.0 Ok: queued\r\n")
	})
	m := newMailer(t, srv.addr, nil)
	msg := testMessage(testKey("k1", 'a'))
	msg.To.Email = "ada@bücher.example"
	if _, err := m.Send(ctxT(t), msg); err != nil {
		t.Fatalf("Send = %v", err)
	}
	if got := <-rcpt; got != "RCPT TO:<ada@xn--bcher-kva.example>\r\n" {
		t.Fatalf("the server read %q, want the domain's A-label", got)
	}
	if c := <-content; !strings.Contains(c, "ada@xn--bcher-kva.example") || strings.Contains(c, "bücher") {
		t.Fatalf("the To header does not carry the A-label:\n%s", c)
	}
	srv.check(t)

	// A domain IDNA2008 refuses is a permanent failure, never sent.
	bad := testMessage(testKey("k1", 'b'))
	bad.To.Email = "ada@bü_cher.example"
	if _, err := m.Send(ctxT(t), bad); err == nil || !strings.Contains(err.Error(), "internationalized domain") {
		t.Fatalf("Send to an invalid IDN = %v; want it refused", err)
	}
}
