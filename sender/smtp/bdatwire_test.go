package smtp_test

import (
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender/smtp"
)

// chunkedExt is what a server with BDAT advertises.
var chunkedExt = []string{"PIPELINING", "8BITMIME", "CHUNKING"}

// chunked reads the test message's MAIL, RCPT and "BDAT <n> LAST" and its
// n bytes, before answering any, and returns the chunk ("" when the
// connection ended first, or ends before a next message).
func (s *rawSession) chunked() string {
	for _, want := range []string{"MAIL FROM:<digest@example.com>", "RCPT TO:<ada@example.net>\r\n", "BDAT "} {
		line := s.line()
		if line == "" && want == "MAIL FROM:<digest@example.com>" {
			return "" // the connection ended between messages
		}
		if !strings.HasPrefix(line, want) {
			s.problem("read %q, want %q", line, want)
			return ""
		} else if want == "BDAT " {
			size, ok := strings.CutSuffix(strings.TrimPrefix(line, want), " LAST\r\n")
			n, err := strconv.Atoi(size)
			if !ok || err != nil {
				s.problem("read %q, want BDAT <n> LAST", line)
				return ""
			}
			chunk := make([]byte, n)
			if _, err := io.ReadFull(s.r, chunk); err != nil {
				return ""
			}
			return string(chunk)
		}
	}
	return ""
}

// chunkServer serves each message with script, counting the chunks it
// read whole (delivered, for the server that accepts them) and the
// connections.
type chunkServer struct {
	*rawSMTP
	mu     sync.Mutex
	chunks int
	conns  int
}

func startChunkServer(t *testing.T, serve func(conn, msg int, s *rawSession)) *chunkServer {
	cs := &chunkServer{}
	cs.rawSMTP = startRawSMTP(t, chunkedExt, func(n int, s *rawSession) {
		cs.mu.Lock()
		cs.conns++
		cs.mu.Unlock()
		for msg := 1; ; msg++ {
			if s.chunked() == "" {
				return
			}
			cs.mu.Lock()
			cs.chunks++
			cs.mu.Unlock()
			serve(n, msg, s)
		}
	})
	return cs
}

func (cs *chunkServer) counts() (chunks, conns int) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.chunks, cs.conns
}

// A server that reads the whole message and closes the connection
// without a reply may have accepted it: the send is ambiguous, never
// temporary, and the message is not sent again on a new connection, on
// a fresh connection or on a pooled one (where a close before the
// content went out, on the DATA path, is retried at once).
func TestSendChunkedClosedAfterChunkIsAmbiguous(t *testing.T) {
	t.Parallel()
	for _, pooled := range []bool{false, true} {
		t.Run(map[bool]string{false: "fresh", true: "pooled"}[pooled], func(t *testing.T) {
			t.Parallel()
			srv := startChunkServer(t, func(_, msg int, s *rawSession) {
				if pooled && msg == 1 {
					s.write("250 ok\r\n250 ok\r\n250 2.0.0 Ok: queued\r\n")
					return
				}
				_ = s.conn.Close()
			})
			m := newMailer(t, srv.addr, nil)
			if pooled {
				if _, err := m.Send(ctxT(t), testMessage(testKey("k1", 'a'))); err != nil {
					t.Fatalf("first Send = %v", err)
				}
			}
			_, err := m.Send(ctxT(t), testMessage(testKey("k1", 'b')))
			if digest.SendClassOf(err) != digest.SendAmbiguous {
				t.Fatalf("Send = %v; want ambiguous", err)
			}
			chunks, conns := srv.counts()
			if want := map[bool]int{false: 1, true: 2}[pooled]; chunks != want || conns != 1 {
				t.Fatalf("the server read %d messages on %d connections; want %d on 1", chunks, conns, want)
			}
			srv.check(t)
		})
	}
}

// No reply at all, or none to BDAT, within the timeout: ambiguous.
func TestSendChunkedNoReplyIsAmbiguous(t *testing.T) {
	t.Parallel()
	for _, replies := range []string{"", "250 ok\r\n", "250 ok\r\n250 ok\r\n"} {
		srv := startChunkServer(t, func(_, _ int, s *rawSession) {
			s.write(replies)
			_, _ = s.r.ReadByte() // until the client gives up
		})
		m := newMailer(t, srv.addr, func(c *smtp.Config) { c.Timeout = 300 * time.Millisecond })
		_, err := m.Send(ctxT(t), testMessage(testKey("k1", 'a')))
		if digest.SendClassOf(err) != digest.SendAmbiguous || !strings.Contains(err.Error(), "BDAT") {
			t.Fatalf("replies %q: Send = %v; want ambiguous, naming BDAT", replies, err)
		}
		if chunks, conns := srv.counts(); chunks != 1 || conns != 1 {
			t.Fatalf("replies %q: the server read %d messages on %d connections; want 1 on 1", replies, chunks, conns)
		}
		srv.check(t)
	}
}

// The replies decide as on the DATA path: a refused recipient (the only
// one) is permanent and not ambiguous, whatever BDAT gets, even no reply;
// a refused BDAT is temporary or permanent by its code; a server that
// takes the chunk after refusing the recipient is ambiguous. The
// connection is dropped after any failure and the next message goes on a
// new one.
func TestSendChunkedReplies(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		replies string
		class   digest.SendClass
		code    int
		stage   gomail.SendErrReason
	}{
		{"250 ok\r\n550 5.1.1 unknown\r\n554 5.5.1 no valid recipients\r\n", digest.SendPermanent, 550, gomail.ErrSMTPRcptTo},
		{"250 ok\r\n550 5.1.1 unknown\r\n", digest.SendPermanent, 550, gomail.ErrSMTPRcptTo},
		{"550 5.7.1 sender refused\r\n503 5.5.1 no MAIL\r\n503 5.5.1 no MAIL\r\n", digest.SendPermanent, 550, gomail.ErrSMTPMailFrom},
		{"451 4.3.0 later\r\n", digest.SendTemporary, 451, gomail.ErrSMTPMailFrom},
		{"250 ok\r\n250 ok\r\n451 4.3.0 try again later\r\n", digest.SendTemporary, 451, gomail.ErrSMTPDataClose},
		{"250 ok\r\n250 ok\r\n554 5.6.0 content refused\r\n", digest.SendPermanent, 554, gomail.ErrSMTPDataClose},
		{"250 ok\r\n550 5.1.1 unknown\r\n250 2.0.0 Ok: queued\r\n", digest.SendAmbiguous, 0, gomail.ErrSMTPDataClose},
	} {
		srv := startChunkServer(t, func(conn, _ int, s *rawSession) {
			if conn > 1 {
				s.write("250 ok\r\n250 ok\r\n250 2.0.0 Ok: queued\r\n")
				return
			}
			s.write(c.replies)
			_ = s.conn.Close()
		})
		m := newMailer(t, srv.addr, nil)
		_, err := m.Send(ctxT(t), testMessage(testKey("k1", 'a')))
		var se *smtp.SMTPError
		want := c.stage.String()
		if c.stage == gomail.ErrSMTPDataClose {
			want = "awaiting the reply to SMTP BDAT LAST" // not go-mail's "closing SMTP DATA writer"
		}
		if digest.SendClassOf(err) != c.class || !errors.As(err, &se) || se.Code != c.code || se.Stage != want {
			t.Fatalf("replies %q: Send = %v; want %v, code %d at %s", c.replies, err, c.class, c.code, want)
		}
		if _, err := m.Send(ctxT(t), testMessage(testKey("k1", 'b'))); err != nil {
			t.Fatalf("replies %q: next Send = %v; want it sent on a new connection", c.replies, err)
		}
		if chunks, conns := srv.counts(); chunks != 2 || conns != 2 {
			t.Fatalf("replies %q: the server read %d messages on %d connections; want 2 on 2", c.replies, chunks, conns)
		}
		srv.check(t)
	}
}

// A server that closes a pooled connection silently (no 421) right after
// answering a message, within the second BDAT reuses connections in: the
// next message is not written into the closed socket, where the EOF that
// follows, with no reply, would be ambiguous (held): the mailer sees the
// close before writing, dials again and sends the message the DATA way,
// once. On the connection that is still open, BDAT goes on as before.
func TestSendChunkedPooledConnectionClosedSilentlyGoesAgainTheDataWay(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{})
	var dataWay, chunks atomic.Int32
	srv := startRawSMTP(t, chunkedExt, func(n int, s *rawSession) {
		if n == 1 {
			if s.chunked() == "" {
				return
			}
			chunks.Add(1)
			s.write("250 ok\r\n250 ok\r\n250 2.0.0 Ok: queued\r\n")
			_ = s.conn.Close()
			close(closed)
			return
		}
		s.message() // MAIL, RCPT, DATA pipelined, then the content
		dataWay.Add(1)
		if s.chunked() != "" { // the next message: BDAT again
			chunks.Add(1)
			s.write("250 ok\r\n250 ok\r\n250 2.0.0 Ok: queued\r\n")
		}
	})
	now := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC) // idle 0: BDAT on every reuse
	m := newMailer(t, srv.addr, func(c *smtp.Config) { c.Now = func() time.Time { return now } })
	if _, err := m.Send(ctxT(t), testMessage(testKey("k1", 'a'))); err != nil {
		t.Fatalf("first Send = %v", err)
	}
	<-closed
	if _, err := m.Send(ctxT(t), testMessage(testKey("k1", 'b'))); err != nil {
		t.Fatalf("Send on the silently closed connection = %v; want it sent on a new one", err)
	}
	if _, err := m.Send(ctxT(t), testMessage(testKey("k1", 'c'))); err != nil {
		t.Fatalf("third Send = %v", err)
	}
	if d, c := dataWay.Load(), chunks.Load(); d != 1 || c != 2 {
		t.Fatalf("the server got %d messages the DATA way and %d as BDAT; want 1 and 2", d, c)
	}
	srv.check(t)
}
