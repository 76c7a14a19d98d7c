package bench

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	gomail "github.com/wneessen/go-mail"
)

// dialGate is a listener that greets no client until n have connected
// (or 3 s have passed): a loop that dials its connections one after
// another, each waiting for its greeting, is found out by the gate
// timing out.
type dialGate struct {
	*net.TCPListener
	n        int
	once     sync.Once
	queue    chan net.Conn
	together atomic.Bool
}

func (g *dialGate) Accept() (net.Conn, error) {
	g.once.Do(func() {
		_ = g.SetDeadline(time.Now().Add(3 * time.Second))
		var got []net.Conn
		for len(got) < g.n {
			c, err := g.TCPListener.Accept()
			if err != nil {
				break
			}
			got = append(got, c)
		}
		_ = g.SetDeadline(time.Time{})
		g.together.Store(len(got) == g.n)
		for _, c := range got {
			g.queue <- c
		}
	})
	select {
	case c := <-g.queue:
		return c, nil
	default:
	}
	return g.TCPListener.Accept()
}

// The limit and plain loops set up their connections at once, as the
// job's pool does, so that at a distance their dials' round trips are
// paid once, not once per connection.
func TestLoopsDialTheirConnectionsAtOnce(t *testing.T) {
	t.Parallel()
	const conns = 3
	msg := []byte("From: a@example.com\r\nTo: b@example.com\r\nSubject: x\r\n\r\nhello\r\n")
	loops := map[string]func(ctx context.Context, addr string) (int, error){
		"limit": func(ctx context.Context, addr string) (int, error) {
			n, _, err := limitLoop(ctx, addr, conns, conns, msg, "a@example.com", "b@example.com")
			return n, err
		},
		"plain": func(ctx context.Context, addr string) (int, error) {
			n, _, err := plainLoop(ctx, addr, conns, conns, func() (func() (*gomail.Msg, error), error) {
				return func() (*gomail.Msg, error) {
					m := gomail.NewMsg()
					if err := m.From("a@example.com"); err != nil {
						return nil, err
					}
					if err := m.To("b@example.com"); err != nil {
						return nil, err
					}
					m.Subject("x")
					m.SetBodyString(gomail.TypeTextPlain, "hello")
					return m, nil
				}, nil
			})
			return n, err
		},
	}
	for name, loop := range loops {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var count atomic.Int64
			srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return nullSession{count: &count}, nil }))
			srv.Domain = "localhost"
			srv.AllowInsecureAuth = true
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			g := &dialGate{TCPListener: l.(*net.TCPListener), n: conns, queue: make(chan net.Conn, conns)}
			go func() { _ = srv.Serve(g) }()
			t.Cleanup(func() { _ = srv.Close() })
			sent, err := loop(t.Context(), l.Addr().String())
			if err != nil || sent != conns {
				t.Fatalf("sent %d (%v); want %d", sent, err, conns)
			}
			if !g.together.Load() {
				t.Errorf("the %s loop waited for one connection's greeting before it dialled the next", name)
			}
		})
	}
}
