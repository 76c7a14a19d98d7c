package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"
	gomail "github.com/wneessen/go-mail"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/snapshot"
)

// nullServer is an SMTP server that accepts every message and discards it.
type nullServer struct {
	srv   *smtp.Server
	addr  string
	count atomic.Int64
}

type nullSession struct{ count *atomic.Int64 }

func (nullSession) Reset()                               {}
func (nullSession) Logout() error                        { return nil }
func (nullSession) Mail(string, *smtp.MailOptions) error { return nil }
func (nullSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s nullSession) Data(r io.Reader) error {
	_, err := io.Copy(io.Discard, r)
	if err == nil {
		s.count.Add(1)
	}
	return err
}

func startNullSMTP() (*nullServer, error) {
	n := &nullServer{}
	n.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return nullSession{count: &n.count}, nil
	}))
	n.srv.Domain = "localhost"
	n.srv.AllowInsecureAuth = true
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: null SMTP server: %w", err)
	}
	n.addr = l.Addr().String()
	go func() { _ = n.srv.Serve(l) }()
	return n, nil
}

func (n *nullServer) close() { _ = n.srv.Close() }

// plainLoop sends count messages with go-mail, one persistent connection
// per worker: the cost of sending and nothing else. newWorker is called
// once per connection and returns that worker's message maker, called
// once per message.
func plainLoop(ctx context.Context, addr string, conns, count int,
	newWorker func() (func() (*gomail.Msg, error), error)) (int, time.Duration, error) {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	clients := make([]*gomail.Client, conns)
	makers := make([]func() (*gomail.Msg, error), conns)
	for i := range clients {
		c, err := gomail.NewClient(host, gomail.WithPort(p), gomail.WithTLSPolicy(gomail.NoTLS), gomail.WithHELO("localhost"))
		if err != nil {
			return 0, 0, fmt.Errorf("bench: plain loop: %w", err)
		}
		clients[i] = c
		if makers[i], err = newWorker(); err != nil {
			return 0, 0, fmt.Errorf("bench: plain loop: %w", err)
		}
	}
	// Dialled at once, not one after another (see limitLoop).
	errs := make([]error, conns)
	var dials sync.WaitGroup
	for i, c := range clients {
		dials.Go(func() { errs[i] = c.DialWithContext(ctx) })
	}
	dials.Wait()
	for i, c := range clients {
		if errs[i] == nil {
			defer c.Close()
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, 0, fmt.Errorf("bench: plain loop: %w", err)
	}
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		sent  atomic.Int64
		first error
		once  sync.Once
	)
	total := int64(count)
	t0 := time.Now()
	for w, c := range clients {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < total && ctx.Err() == nil; i = next.Add(1) - 1 {
				msg, err := makers[w]()
				if err == nil {
					err = c.Send(msg)
				}
				if err != nil {
					once.Do(func() { first = err })
					return
				}
				sent.Add(1)
			}
		})
	}
	wg.Wait()
	d := time.Since(t0)
	if first != nil {
		return int(sent.Load()), d, fmt.Errorf("bench: plain loop: %w", first)
	}
	return int(sent.Load()), d, ctx.Err()
}

// renderedMessages returns a worker maker for plainLoop that builds each
// message from pre-rendered digests, as the in-process bench does.
func renderedMessages(cfg Config) (func() (func() (*gomail.Msg, error), error), error) {
	msgs, err := sampleMessages(cfg, 64)
	if err != nil {
		return nil, err
	}
	var next atomic.Int64
	return func() (func() (*gomail.Msg, error), error) {
		return func() (*gomail.Msg, error) {
			dm := msgs[int(next.Add(1)-1)%len(msgs)]
			msg := gomail.NewMsg()
			err := msg.From("Account digest <digest@example.com>")
			if err == nil {
				err = msg.AddToFormat(dm.To.Name, dm.To.Email)
			}
			if err != nil {
				return nil, err
			}
			msg.Subject(dm.Subject)
			msg.SetDate()
			msg.SetMessageID()
			msg.SetBodyString(gomail.TypeTextPlain, dm.Text)
			msg.AddAlternativeString(gomail.TypeTextHTML, dm.HTML)
			return msg, nil
		}, nil
	}, nil
}

// sampleMessages renders the first n non-empty synthetic digests, so the
// plain loop sends bodies of the same size as the run.
func sampleMessages(cfg Config, n int) ([]digest.Message, error) {
	r, err := digest.NewRenderer()
	if err != nil {
		return nil, err
	}
	spec := digest.Spec{Week: cfg.Week, Type: "weekly_activity", Version: "v1"}
	var out []digest.Message
	for rec := range snapshot.Synthetic(max(n*2, 200), cfg.Week, cfg.Seed) {
		d, err := digest.Build(rec, spec)
		if err != nil {
			return nil, err
		}
		if d.Empty() {
			continue
		}
		got, err := r.Render(&d)
		if err != nil {
			return nil, err
		}
		out = append(out, digest.Message{To: digest.Address{Name: d.Customer.Name, Email: d.Customer.Email},
			Subject: got.Subject, Text: got.Text, HTML: got.HTML})
		if len(out) == n {
			break
		}
	}
	return out, nil
}
