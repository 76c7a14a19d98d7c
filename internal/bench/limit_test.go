package bench

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-smtp"
)

// recordingSink is a go-smtp server that keeps every message it receives
// and every byte its clients wrote.
type recordingSink struct {
	addr string
	mu   sync.Mutex
	msgs [][]byte
	from []string
	to   []string
	wire bytes.Buffer
}

type recordingSession struct{ s *recordingSink }

func (recordingSession) Reset()        {}
func (recordingSession) Logout() error { return nil }
func (r recordingSession) Mail(from string, _ *smtp.MailOptions) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.s.from = append(r.s.from, from)
	return nil
}
func (r recordingSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.s.to = append(r.s.to, to)
	return nil
}
func (r recordingSession) Data(rd io.Reader) error {
	b, err := io.ReadAll(rd)
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.s.msgs = append(r.s.msgs, b)
	return err
}

type wireListener struct {
	net.Listener
	s *recordingSink
}

func (l wireListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	return wireConn{Conn: c, s: l.s}, err
}

type wireConn struct {
	net.Conn
	s *recordingSink
}

func (c wireConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.s.mu.Lock()
	c.s.wire.Write(b[:n])
	c.s.mu.Unlock()
	return n, err
}

func startRecordingSink(t *testing.T, chunking bool) *recordingSink {
	t.Helper()
	s := &recordingSink{}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return recordingSession{s}, nil }))
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	var sl net.Listener = wireListener{Listener: l, s: s}
	if !chunking {
		sl = noChunkingListener{sl}
	}
	go func() { _ = srv.Serve(sl) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// The limit loop delivers the file's bytes exactly, as many times as
// asked, to the envelope of its headers: as one BDAT LAST per message
// where the server offers CHUNKING, dot-stuffed after DATA where not.
func TestLimitLoopSendsTheMessageBytes(t *testing.T) {
	t.Parallel()
	message := []byte("From: \"Account digest\" <digest@example.com>\r\nTo: <ada@example.net>\r\nSubject: s\r\n\r\n" +
		"a line\r\n.a line that starts with a dot\r\n..two\r\n.\r\nlast\r\n")
	eml := filepath.Join(t.TempDir(), "m.eml")
	if err := os.WriteFile(eml, message, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, chunking := range []bool{true, false} {
		s := startRecordingSink(t, chunking)
		const n = 7
		sent, err := LimitLoopEML(context.Background(), s.addr, eml, n, 3)
		if err != nil || sent != n {
			t.Fatalf("chunking %v: sent %d, %v; want %d", chunking, sent, err, n)
		}
		s.mu.Lock()
		if len(s.msgs) != n {
			t.Errorf("chunking %v: the sink received %d messages, want %d", chunking, len(s.msgs), n)
		}
		for i, m := range s.msgs {
			if !bytes.Equal(m, message) {
				t.Errorf("chunking %v: message %d is\n%q\nwant\n%q", chunking, i, m, message)
			}
		}
		for i := range s.from {
			if s.from[i] != "digest@example.com" || s.to[i] != "ada@example.net" {
				t.Errorf("chunking %v: envelope %q -> %q, want the message's From and To", chunking, s.from[i], s.to[i])
			}
		}
		wire := s.wire.String()
		bdat, data := strings.Count(wire, " LAST\r\n"), strings.Count(wire, "\r\nDATA\r\n")
		if chunking && (bdat != n || data != 0) || !chunking && (bdat != 0 || data != n) {
			t.Errorf("chunking %v: %d BDAT LAST and %d DATA on the wire for %d messages", chunking, bdat, data, n)
		}
		if !chunking && !strings.Contains(wire, "\r\n..a line that starts with a dot\r\n...two\r\n..\r\nlast\r\n.\r\n") {
			t.Errorf("no CHUNKING: the content was not dot-stuffed:\n%q", wire)
		}
		s.mu.Unlock()
	}
}

func TestDotStuff(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                ".\r\n",
		"a\r\n":           "a\r\n.\r\n",
		".\r\n":           "..\r\n.\r\n",
		"a\r\n.b\r\nc":    "a\r\n..b\r\nc\r\n.\r\n",
		"x.y\r\n..\r\n.z": "x.y\r\n...\r\n..z\r\n.\r\n",
	} {
		if got := string(dotStuff([]byte(in))); got != want {
			t.Errorf("dotStuff(%q) = %q, want %q", in, got, want)
		}
	}
}
