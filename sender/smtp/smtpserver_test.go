package smtp_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	smtpd "github.com/emersion/go-smtp"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender/smtp"
)

// stage is where a fault strikes.
type stage int

const (
	atMail  stage = iota + 1
	atRcpt        // the RCPT command
	atData        // after the whole message was read, instead of the final reply
	atReset       // after the final 250 was written: the message was accepted
)

// action is what the faulty server does at its stage.
type action int

const (
	reply action = iota + 1 // answer with fault.err
	drop                    // close the connection without a reply
	hang                    // say nothing until the test ends
)

type fault struct {
	at     stage
	action action
	err    *smtpd.SMTPError
	times  int // how many sessions fault before the server behaves; 0 = all
	after  int // how many times the stage passes before the first fault
}

// testServer is an in-process go-smtp server that records what it accepts
// and injects one fault.
type testServer struct {
	addr    string
	fault   fault
	release chan struct{}
	faulted atomic.Int64
	no8bit  atomic.Bool // hide 8BITMIME from EHLO replies
	noPipe  atomic.Bool // hide PIPELINING from EHLO replies
	// chunking shows go-smtp's CHUNKING in EHLO replies; hidden by
	// default, so that a test says which path (DATA or BDAT) it is for.
	chunking atomic.Bool

	mu       sync.Mutex
	commands map[string]int // by verb, as read from the clients (see countConn)
	reads    [][]string     // the verbs of the command lines each Read ended, when any
	raw      [][]byte       // the content of each DATA as it came on the wire, final dot included
	chunks   [][]byte       // the content of each BDAT as it came on the wire
	received []received
	conns    []net.Conn
	logouts  chan struct{}
}

type received struct {
	at   time.Time
	data []byte
}

// startSMTP starts a go-smtp server on a free loopback port, closed when the
// test ends. A zero fault makes it accept everything.
func startSMTP(t testing.TB, f fault) *testServer {
	t.Helper()
	return startSMTPTLS(t, f, nil)
}

// startSMTPTLS is startSMTP with STARTTLS offered under tlsConfig, when
// not nil.
func startSMTPTLS(t testing.TB, f fault, tlsConfig *tls.Config) *testServer {
	t.Helper()
	s := &testServer{fault: f, release: make(chan struct{}), logouts: make(chan struct{}, 1024), commands: map[string]int{}}
	srv := smtpd.NewServer(smtpd.BackendFunc(func(c *smtpd.Conn) (smtpd.Session, error) {
		s.mu.Lock()
		s.conns = append(s.conns, c.Conn())
		s.mu.Unlock()
		return &session{s: s, conn: c.Conn()}, nil
	}))
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	srv.TLSConfig = tlsConfig
	srv.ReadTimeout = 10 * time.Second
	srv.WriteTimeout = 10 * time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	go func() { _ = srv.Serve(countListener{Listener: l, s: s}) }()
	t.Cleanup(func() { _ = srv.Close() })
	t.Cleanup(func() { close(s.release) }) // runs first: unblock hung sessions
	return s
}

// strike reports whether this session should fault at st.
func (s *testServer) strike(st stage) bool {
	if s.fault.at != st {
		return false
	}
	n := s.faulted.Add(1) - int64(s.fault.after)
	return n > 0 && (s.fault.times == 0 || n <= int64(s.fault.times))
}

// count returns how many of each verb the server has read: "MAIL",
// "NOOP", "RSET"...
func (s *testServer) count() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.commands)
}

// countListener hands out connections that count the client's commands.
type countListener struct {
	net.Listener
	s *testServer
}

func (l countListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countConn{Conn: c, s: l.s}, nil
}

// countConn counts, as the server reads them, the verbs of the command
// lines a client sends, and records the content between DATA and its final
// dot (that dot included) byte for byte.
type countConn struct {
	net.Conn
	s       *testServer
	line    []byte
	content bool
	raw     []byte
	chunk   int // the bytes of a BDAT chunk still to come
}

func (c *countConn) Write(b []byte) (int, error) {
	if c.s.no8bit.Load() {
		b = bytes.ReplaceAll(b, []byte("8BITMIME"), []byte("XBITMIME"))
	}
	if c.s.noPipe.Load() {
		b = bytes.ReplaceAll(b, []byte("PIPELINING"), []byte("XIPELINING"))
	}
	if !c.s.chunking.Load() {
		b = bytes.ReplaceAll(b, []byte("CHUNKING"), []byte("XHUNKING"))
	}
	return c.Conn.Write(b)
}

func (c *countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	var verbs []string
	defer func() {
		if len(verbs) > 0 {
			c.s.mu.Lock()
			c.s.reads = append(c.s.reads, verbs)
			c.s.mu.Unlock()
		}
	}()
	for _, ch := range b[:n] {
		if c.chunk > 0 {
			c.raw = append(c.raw, ch)
			if c.chunk--; c.chunk == 0 {
				c.s.mu.Lock()
				c.s.chunks = append(c.s.chunks, c.raw)
				c.s.mu.Unlock()
				c.raw = nil
			}
			continue
		}
		if ch != '\n' {
			c.line = append(c.line, ch)
			continue
		}
		line := strings.TrimSuffix(string(c.line), "\r")
		switch {
		case c.content:
			c.raw = append(append(c.raw, c.line...), '\n')
			if c.content = line != "."; !c.content {
				c.s.mu.Lock()
				c.s.raw = append(c.s.raw, c.raw)
				c.s.mu.Unlock()
				c.raw = nil
			}
		default:
			verb, _, _ := strings.Cut(line, " ")
			verb = strings.ToUpper(verb)
			c.content = verb == "DATA"
			if verb == "BDAT" {
				size, _, _ := strings.Cut(strings.TrimPrefix(line[len(verb):], " "), " ")
				c.chunk, _ = strconv.Atoi(size)
			}
			verbs = append(verbs, verb)
			c.s.mu.Lock()
			c.s.commands[verb]++
			c.s.mu.Unlock()
		}
		c.line = c.line[:0]
	}
	return n, err
}

// readTogether returns the verbs of the command lines each Read of the
// server ended: commands pipelined in one write come in one Read.
func (s *testServer) readTogether() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]string(nil), s.reads...)
}

// rawData returns the content of each DATA the server read, as sent.
func (s *testServer) rawData() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.raw...)
}

// rawChunks returns the content of each BDAT the server read.
func (s *testServer) rawChunks() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.chunks...)
}

func (s *testServer) messages() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.received...)
}

// closeSessions closes every connection the server has and waits until
// each session has ended.
func (s *testServer) closeSessions(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	for range conns {
		select {
		case <-s.logouts:
		case <-time.After(10 * time.Second):
			t.Fatal("sessions did not end")
		}
	}
}

type session struct {
	s        *testServer
	conn     net.Conn
	accepted bool
}

func (ss *session) act(st stage) error {
	if !ss.s.strike(st) {
		return nil
	}
	switch ss.s.fault.action {
	case drop:
		_ = ss.conn.Close()
		return &smtpd.SMTPError{Code: 421, Message: "gone"} // never reaches the client
	case hang:
		<-ss.s.release
		return &smtpd.SMTPError{Code: 421, Message: "too late"}
	}
	return ss.s.fault.err
}

func (ss *session) Mail(string, *smtpd.MailOptions) error { return ss.act(atMail) }
func (ss *session) Rcpt(string, *smtpd.RcptOptions) error { return ss.act(atRcpt) }

func (ss *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if err := ss.act(atData); err != nil {
		return err
	}
	ss.s.mu.Lock()
	ss.s.received = append(ss.s.received, received{at: time.Now(), data: b})
	ss.s.mu.Unlock()
	ss.accepted = true
	return nil
}

// Reset runs after the reply to DATA was written, and on RSET.
func (ss *session) Reset() {
	if ss.accepted {
		ss.accepted = false
		_ = ss.act(atReset)
	}
}

func (ss *session) Logout() error {
	ss.s.logouts <- struct{}{}
	return nil
}

// newMailer returns a mailer to addr without TLS, closed when the test ends.
func newMailer(t testing.TB, addr string, edit func(*smtp.Config)) *smtp.Mailer {
	t.Helper()
	smtpCfg, err := smtp.ParseSMTPURL("smtp://" + addr + "?tls=none")
	if err != nil {
		t.Fatal(err)
	}
	cfg := smtp.Config{
		SMTP:        smtpCfg,
		From:        digest.Address{Name: "Weekly Digest", Email: "digest@example.com"},
		Concurrency: 1,
		Timeout:     2 * time.Second,
		HELO:        "localhost",
	}
	if edit != nil {
		edit(&cfg)
	}
	m, err := smtp.NewMailer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// testKey returns a valid key whose hex part repeats c.
func testKey(kid string, c byte) digest.Key {
	return digest.Key(kid + ":" + string(bytes.Repeat([]byte{c}, 64)))
}

func testMessage(key digest.Key) *digest.Message {
	return &digest.Message{
		Key:     key,
		To:      digest.Address{Name: "Ada Lovelace", Email: "ada@example.net"},
		Subject: "Your week",
		Text:    "Hello Ada,\n\n3 payments this week.\n",
		HTML:    "<p>Hello Ada,</p><p>3 payments &amp; &lt;refunds&gt; this week.</p>",
	}
}

func contextWithCancel(t testing.TB) (context.Context, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx, cancel
}

func ctxT(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
