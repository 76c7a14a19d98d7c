package smtp_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender/smtp"
)

// rawSMTP is a scripted SMTP server on plain sockets, for what go-smtp
// will not do: answer out of turn, or hold replies until the client has
// sent more. Each connection is greeted, its EHLO answered with ext, and
// then served by script, with its number (from 1).
type rawSMTP struct {
	addr string

	mu       sync.Mutex
	problems []string // what scripts found wrong, reported by check
	conns    []net.Conn
}

type script func(n int, s *rawSession)

type rawSession struct {
	srv  *rawSMTP
	conn net.Conn
	r    *bufio.Reader
}

func startRawSMTP(t *testing.T, ext []string, serve script) *rawSMTP {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &rawSMTP{addr: l.Addr().String()}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 1; ; n++ {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			srv.mu.Lock()
			srv.conns = append(srv.conns, conn)
			srv.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
				s := &rawSession{srv: srv, conn: conn, r: bufio.NewReader(conn)}
				s.write("220 localhost ESMTP\r\n")
				if line := s.line(); !strings.HasPrefix(line, "EHLO ") {
					s.problem("want EHLO, read %q", line)
					return
				}
				ehlo := "250-localhost\r\n"
				for _, e := range ext {
					ehlo += "250-" + e + "\r\n"
				}
				s.write(ehlo + "250 HELP\r\n")
				serve(n, s)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		srv.mu.Lock()
		for _, c := range srv.conns {
			_ = c.Close()
		}
		srv.mu.Unlock()
		wg.Wait()
	})
	return srv
}

// check fails t with what the scripts found wrong.
func (srv *rawSMTP) check(t *testing.T) {
	t.Helper()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for _, p := range srv.problems {
		t.Error(p)
	}
}

func (s *rawSession) problem(format string, args ...any) {
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	s.srv.problems = append(s.srv.problems, "server: "+fmt.Sprintf(format, args...))
}

func (s *rawSession) write(reply string) { _, _ = io.WriteString(s.conn, reply) }

// line reads one line, CRLF included; "" when the connection ended.
func (s *rawSession) line() string {
	line, _ := s.r.ReadString('\n')
	return line
}

// commands reads the pipelined MAIL, RCPT and DATA of the test message,
// before answering any.
func (s *rawSession) commands() {
	for _, want := range []string{"MAIL FROM:<digest@example.com>", "RCPT TO:<ada@example.net>\r\n", "DATA\r\n"} {
		if line := s.line(); !strings.HasPrefix(line, want) {
			s.problem("read %q, want %q", line, want)
		}
	}
}

// content reads a message's content up to its final dot and returns it.
func (s *rawSession) content() string {
	var b strings.Builder
	for {
		line := s.line()
		b.WriteString(line)
		if line == ".\r\n" || line == "" {
			return b.String()
		}
	}
}

// message serves one pipelined message to the end and accepts it.
func (s *rawSession) message() {
	s.commands()
	s.write("250 ok\r\n250 ok\r\n354 go ahead\r\n")
	s.content()
	s.write("250 2.0.0 Ok: queued\r\n")
}

// ended reports whether the client closed the connection (rather than
// sending more).
func (s *rawSession) ended() bool {
	_, err := s.r.ReadByte()
	return errors.Is(err, io.EOF)
}

// A server that answers DATA with 354 although it refused the only
// recipient gets an empty message, ended at once; the send fails with
// RCPT's refusal (permanent: the server has no recipient, nothing can
// have been delivered), the connection is dropped, and the next message
// goes on a new one.
func TestSendPipelined354AfterRefusedRcpt(t *testing.T) {
	t.Parallel()
	ended := make(chan bool, 1)
	after := make(chan string, 1)
	srv := startRawSMTP(t, []string{"PIPELINING", "8BITMIME"}, func(n int, s *rawSession) {
		if n > 1 {
			s.message()
			return
		}
		s.commands()
		s.write("250 ok\r\n550 5.1.1 unknown\r\n354 go ahead\r\n")
		after <- s.content()
		s.write("554 5.5.1 no valid recipients\r\n")
		ended <- s.ended()
	})
	m := newMailer(t, srv.addr, nil)
	_, err := m.Send(ctxT(t), testMessage(testKey("k1", 'a')))
	var se *smtp.SMTPError
	if digest.SendClassOf(err) != digest.SendPermanent || !errors.As(err, &se) || se.Code != 550 || se.Stage != gomail.ErrSMTPRcptTo.String() {
		t.Fatalf("Send = %v; want RCPT's 550, permanent", err)
	}
	if got := <-after; got != ".\r\n" {
		t.Errorf("after 354 the server read %q, want only the final dot", got)
	}
	if !<-ended {
		t.Error("the connection was not dropped")
	}
	if _, err := m.Send(ctxT(t), testMessage(testKey("k1", 'b'))); err != nil {
		t.Fatalf("next Send = %v; want it sent on a new connection", err)
	}
	srv.check(t)
}

// A connection the server closes once it has read the pipelined commands,
// before any reply, has delivered nothing: a fresh one fails temporary
// (not ambiguous); a pooled one is replaced and the message sent on the
// new one, once.
func TestSendPipelinedConnectionClosedBeforeReplies(t *testing.T) {
	t.Parallel()
	t.Run("fresh", func(t *testing.T) {
		t.Parallel()
		srv := startRawSMTP(t, []string{"PIPELINING"}, func(_ int, s *rawSession) { s.commands() })
		m := newMailer(t, srv.addr, nil)
		_, err := m.Send(ctxT(t), testMessage(testKey("k1", 'a')))
		if digest.SendClassOf(err) != digest.SendTemporary {
			t.Fatalf("Send = %v; want temporary", err)
		}
		srv.check(t)
	})
	t.Run("pooled", func(t *testing.T) {
		t.Parallel()
		// The server counts a message after its reply went out: the
		// client may see the reply first, so the test waits for the
		// count rather than reading it at once.
		delivered := make(chan struct{}, 4)
		srv := startRawSMTP(t, []string{"PIPELINING"}, func(n int, s *rawSession) {
			s.message()
			delivered <- struct{}{}
			if n == 1 {
				s.commands() // of the second message: then gone
			}
		})
		m := newMailer(t, srv.addr, nil)
		for _, c := range []byte{'a', 'b'} {
			if _, err := m.Send(ctxT(t), testMessage(testKey("k1", c))); err != nil {
				t.Fatalf("Send %c = %v; want success", c, err)
			}
		}
		for i := range 2 {
			select {
			case <-delivered:
			case <-time.After(10 * time.Second):
				t.Fatalf("the server accepted %d messages, want 2", i)
			}
		}
		srv.check(t)
		if n := len(delivered); n != 0 {
			t.Fatalf("the server accepted %d messages more than 2", n)
		}
	})
}

// Without PIPELINING the mailer waits for each reply before the next
// command: the server finds nothing more sent while it holds a reply.
func TestSendWithoutPipeliningGoesInStep(t *testing.T) {
	t.Parallel()
	srv := startRawSMTP(t, []string{"8BITMIME"}, func(_ int, s *rawSession) {
		for _, c := range []struct{ want, reply string }{
			{"MAIL FROM:<digest@example.com> BODY=8BITMIME\r\n", "250 ok\r\n"},
			{"RCPT TO:<ada@example.net>\r\n", "250 ok\r\n"},
			{"DATA\r\n", "354 go ahead\r\n"},
		} {
			if line := s.line(); line != c.want {
				s.problem("read %q, want %q", line, c.want)
			}
			// Anything sent before the reply would arrive meanwhile.
			_ = s.conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			if b, err := s.r.Peek(1); err == nil {
				s.problem("the client sent %q before the reply", b)
			}
			_ = s.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			s.write(c.reply)
		}
		s.content()
		s.write("250 2.0.0 Ok: queued\r\n")
	})
	m := newMailer(t, srv.addr, nil)
	if _, err := m.Send(ctxT(t), testMessage(testKey("k1", 'a'))); err != nil {
		t.Fatalf("Send = %v", err)
	}
	srv.check(t)
}

// A recipient refused (550) on a pooled connection is permanent and leaves
// the mailer able to send the next message.
func TestSendPipelinedRefusedRcptThenNext(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, fault{at: atRcpt, action: reply, err: smtpErr(550), after: 1, times: 1})
	m := newMailer(t, srv.addr, nil)
	for i, refused := range []bool{false, true, false} {
		_, err := m.Send(ctxT(t), testMessage(testKey("k1", byte('a'+i))))
		if !refused && err != nil || refused && digest.SendClassOf(err) != digest.SendPermanent {
			t.Fatalf("Send %d = %v; want refused (permanent) %v", i, err, refused)
		}
	}
	if got := len(srv.messages()); got != 2 {
		t.Fatalf("server stored %d messages, want 2", got)
	}
	wantPipelined(t, srv, true)
}
