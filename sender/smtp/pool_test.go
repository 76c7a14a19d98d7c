package smtp_test

import (
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender/smtp"
)

// wantCommands fails t unless the server read exactly want (verbs not
// named: none).
func wantCommands(t *testing.T, srv *testServer, want map[string]int) {
	t.Helper()
	got := srv.count()
	delete(got, "QUIT") // Close's, when it has run
	if !maps.Equal(got, want) {
		t.Fatalf("server read commands %v, want %v", got, want)
	}
}

// A healthy pooled connection carries message after message with only the
// commands SMTP requires: MAIL, RCPT and DATA each, no NOOP before and no
// RSET after.
func TestSendPooledConnectionSendsNoNoopOrRset(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, fault{})
	m := newMailer(t, srv.addr, nil)
	const n = 5
	for i := range n {
		if _, err := m.Send(ctxT(t), testMessage(testKey("k1", byte('a'+i)))); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	wantCommands(t, srv, map[string]int{"EHLO": 1, "MAIL": n, "RCPT": n, "DATA": n})
	if got := len(srv.messages()); got != n {
		t.Fatalf("server stored %d messages, want %d", got, n)
	}
}

// clock is a Config.Now the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// A connection idle for 30 s or more is checked with one NOOP before its
// next message; one used less than that is not.
func TestSendChecksOnlyAnIdleConnection(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, fault{})
	clk := &clock{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	m := newMailer(t, srv.addr, func(c *smtp.Config) { c.Now = clk.Now })
	send := func(c byte) {
		t.Helper()
		if _, err := m.Send(ctxT(t), testMessage(testKey("k1", c))); err != nil {
			t.Fatal(err)
		}
	}
	send('a')
	clk.add(29 * time.Second)
	send('b')
	wantCommands(t, srv, map[string]int{"EHLO": 1, "MAIL": 2, "RCPT": 2, "DATA": 2})
	clk.add(30 * time.Second)
	send('c')
	wantCommands(t, srv, map[string]int{"EHLO": 1, "NOOP": 1, "MAIL": 3, "RCPT": 3, "DATA": 3})
}

// A pooled connection the server closed while it was idle, and more
// recently used than the idle check: MAIL fails with no reply, nothing was
// sent, so the mailer dials again and sends the message once, with no
// error at all.
func TestSendRecoversAConnectionClosedWhileIdle(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, fault{})
	m := newMailer(t, srv.addr, nil)
	if _, err := m.Send(ctxT(t), testMessage(testKey("k1", 'a'))); err != nil {
		t.Fatal(err)
	}
	srv.closeSessions(t)
	if _, err := m.Send(ctxT(t), testMessage(testKey("k1", 'b'))); err != nil {
		t.Fatalf("Send on a connection closed while idle = %v; want a new connection and success", err)
	}
	msgs := srv.messages()
	if len(msgs) != 2 {
		t.Fatalf("server stored %d messages, want 2 (each once)", len(msgs))
	}
	// The dead connection's MAIL never reached a session.
	wantCommands(t, srv, map[string]int{"EHLO": 2, "MAIL": 2, "RCPT": 2, "DATA": 2})
}

// A pooled connection lost after the content went out stays ambiguous: the
// mailer neither dials again nor sends the message a second time.
func TestSendPooledConnectionLostAfterDataIsAmbiguous(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, fault{at: atData, action: drop, after: 1})
	m := newMailer(t, srv.addr, nil)
	if _, err := m.Send(ctxT(t), testMessage(testKey("k1", 'a'))); err != nil {
		t.Fatal(err)
	}
	_, err := m.Send(ctxT(t), testMessage(testKey("k1", 'b')))
	if digest.SendClassOf(err) != digest.SendAmbiguous {
		t.Fatalf("Send = %v; want ambiguous", err)
	}
	wantCommands(t, srv, map[string]int{"EHLO": 1, "MAIL": 2, "RCPT": 2, "DATA": 2})
}

// A pooled connection on which the server answers MAIL with 421 (closing
// the channel) is replaced, and the message goes once on the new one.
func TestSendPooledConnection421AtMailRedials(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, fault{at: atMail, action: reply, err: smtpErr(421), after: 1, times: 1})
	m := newMailer(t, srv.addr, nil)
	for _, c := range []byte{'a', 'b'} {
		if _, err := m.Send(ctxT(t), testMessage(testKey("k1", c))); err != nil {
			t.Fatalf("Send %c = %v; want success", c, err)
		}
	}
	if got := len(srv.messages()); got != 2 {
		t.Fatalf("server stored %d messages, want 2", got)
	}
	// The refused MAIL came pipelined with its RCPT and DATA, which the
	// server read (and refused) too.
	wantCommands(t, srv, map[string]int{"EHLO": 2, "MAIL": 3, "RCPT": 3, "DATA": 3})
}

// With CHUNKING, a fresh connection and one used within chunkIdle carry the
// message as BDAT; one idle longer sends it the DATA way, so that a server
// that closed it meanwhile fails MAIL before any content went out (not
// ambiguous), and the message goes once on a new connection.
func TestSendChunksOnlyOnARecentlyUsedConnection(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, fault{})
	srv.chunking.Store(true)
	clk := &clock{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	m := newMailer(t, srv.addr, func(c *smtp.Config) { c.Now = clk.Now })
	send := func(c byte) {
		t.Helper()
		if _, err := m.Send(ctxT(t), testMessage(testKey("k1", c))); err != nil {
			t.Fatalf("send %c: %v", c, err)
		}
	}
	send('a') // fresh: BDAT
	clk.add(smtp.ChunkIdle / 2)
	send('b') // recent: BDAT
	wantCommands(t, srv, map[string]int{"EHLO": 1, "MAIL": 2, "RCPT": 2, "BDAT": 2})
	clk.add(smtp.ChunkIdle)
	send('c') // idle: DATA
	wantCommands(t, srv, map[string]int{"EHLO": 1, "MAIL": 3, "RCPT": 3, "BDAT": 2, "DATA": 1})

	// Closed by the server while idle: the DATA way finds it dead before
	// any content (its MAIL reaches no session), and the message goes once
	// on a new connection, fresh, so as BDAT.
	clk.add(smtp.ChunkIdle)
	srv.closeSessions(t)
	send('d')
	if msgs := srv.messages(); len(msgs) != 4 {
		t.Fatalf("server stored %d messages, want 4 (each once)", len(msgs))
	}
	wantCommands(t, srv, map[string]int{"EHLO": 2, "MAIL": 4, "RCPT": 4, "BDAT": 3, "DATA": 1})
}
