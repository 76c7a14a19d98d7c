package smtp_test

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	smtpd "github.com/emersion/go-smtp"

	"github.com/weeklydigest/digest/sender/smtp"
)

// quitGate holds the server's reading of each QUIT until n QUITs have
// come (or the patience runs out): a client that waits for one QUIT's
// reply before it sends the next is found out by the gate timing out.
type quitGate struct {
	n        int
	mu       sync.Mutex
	seen     int
	all      chan struct{}
	timedOut atomic.Bool
	accepted atomic.Int64
}

func (g *quitGate) arrive() {
	g.mu.Lock()
	if g.seen++; g.seen == g.n {
		close(g.all)
	}
	g.mu.Unlock()
	select {
	case <-g.all:
	case <-time.After(3 * time.Second):
		g.timedOut.Store(true)
	}
}

type gateListener struct {
	net.Listener
	g *quitGate
}

func (l gateListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.g.accepted.Add(1)
		c = gateConn{Conn: c, g: l.g}
	}
	return c, err
}

type gateConn struct {
	net.Conn
	g *quitGate
}

// Read returns a QUIT to the server only once the gate opens (the client
// writes QUIT alone, after its last reply: one Read).
func (c gateConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if bytes.Contains(b[:n], []byte("QUIT\r\n")) {
		c.g.arrive()
	}
	return n, err
}

// Close says QUIT on every connection before it awaits any reply: closing
// C connections to a server RTT away takes one round trip, not C (a week
// of 16 connections at 50 ms spent 0.8 s in Close). The server here holds
// each QUIT until all have come, which a one-after-the-other Close never
// lets happen.
func TestCloseQuitsEveryConnectionAtOnce(t *testing.T) {
	t.Parallel()
	const conns = 3
	g := &quitGate{n: conns, all: make(chan struct{})}
	srv := smtpd.NewServer(smtpd.BackendFunc(func(*smtpd.Conn) (smtpd.Session, error) { return nullSession{}, nil }))
	srv.Domain = "localhost"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(gateListener{Listener: l, g: g}) }()
	t.Cleanup(func() { _ = srv.Close() })

	m := newMailer(t, l.Addr().String(), func(c *smtp.Config) { c.Concurrency = conns })
	// Sends one after another take the pool's slots in turn: one
	// connection each.
	for i := range conns {
		if _, err := m.Send(ctxT(t), testMessage(testKey("k1", byte('a'+i)))); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if got := g.accepted.Load(); got != conns {
		t.Fatalf("the mailer opened %d connections, want %d", got, conns)
	}
	if err := m.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if g.timedOut.Load() {
		t.Errorf("Close awaited a QUIT's reply before it said QUIT on every connection")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen != conns {
		t.Errorf("the server read %d QUITs, want %d", g.seen, conns)
	}
}
