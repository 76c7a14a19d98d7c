package smtp_test

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	smtpd "github.com/emersion/go-smtp"
	gomail "github.com/wneessen/go-mail"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender/smtp"
)

// nullSession accepts and discards everything.
type nullSession struct{}

func (nullSession) Reset()                                {}
func (nullSession) Logout() error                         { return nil }
func (nullSession) Mail(string, *smtpd.MailOptions) error { return nil }
func (nullSession) Rcpt(string, *smtpd.RcptOptions) error { return nil }
func (nullSession) Data(r io.Reader) error                { _, err := io.Copy(io.Discard, r); return err }

func startNullSMTP(b *testing.B) string {
	b.Helper()
	srv := smtpd.NewServer(smtpd.BackendFunc(func(*smtpd.Conn) (smtpd.Session, error) { return nullSession{}, nil }))
	srv.Domain = "localhost"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	b.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// runParallel splits b.N sends over conns goroutines.
func runParallel(b *testing.B, conns int, send func(worker, i int) error) {
	b.Helper()
	var wg sync.WaitGroup
	var once sync.Once
	per := (b.N + conns - 1) / conns
	b.ResetTimer()
	for w := range conns {
		wg.Go(func() {
			for i := w * per; i < min((w+1)*per, b.N); i++ {
				if err := send(w, i); err != nil {
					once.Do(func() { b.Error(err) })
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}

// BenchmarkSend compares the mailer (message building, pool, limiter,
// classification) with a plain go-mail loop over the same number of
// persistent connections to the same null server.
func BenchmarkSend(b *testing.B) {
	for _, conns := range []int{1, 4} {
		b.Run("plain-go-mail/conns="+strconv.Itoa(conns), func(b *testing.B) {
			addr := startNullSMTP(b)
			host, port, _ := net.SplitHostPort(addr)
			p, _ := strconv.Atoi(port)
			clients := make([]*gomail.Client, conns)
			for i := range clients {
				c, err := gomail.NewClient(host, gomail.WithPort(p), gomail.WithTLSPolicy(gomail.NoTLS), gomail.WithHELO("localhost"))
				if err != nil {
					b.Fatal(err)
				}
				if err := c.DialWithContext(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = c.Close() })
				clients[i] = c
			}
			dm := testMessage(testKey("bench", 'a'))
			runParallel(b, conns, func(w, _ int) error {
				msg := gomail.NewMsg()
				if err := msg.FromFormat("Weekly Digest", "digest@example.com"); err != nil {
					return err
				}
				if err := msg.AddToFormat(dm.To.Name, dm.To.Email); err != nil {
					return err
				}
				msg.Subject(dm.Subject)
				msg.SetDate()
				msg.SetMessageID()
				msg.SetBodyString(gomail.TypeTextPlain, dm.Text)
				msg.AddAlternativeString(gomail.TypeTextHTML, dm.HTML)
				return clients[w].Send(msg)
			})
		})
		b.Run("mailer/conns="+strconv.Itoa(conns), func(b *testing.B) {
			addr := startNullSMTP(b)
			lim, err := smtp.NewLimiter(1e6, 1000) // far above what the loop reaches
			if err != nil {
				b.Fatal(err)
			}
			m := newMailer(b, addr, func(c *smtp.Config) {
				c.Concurrency = conns
				c.Limiter = lim
			})
			ctx := context.Background()
			msg := testMessage(testKey("bench", 'a'))
			// Warm the pool so both sides start with open connections.
			for range conns {
				if _, err := m.Send(ctx, msg); err != nil {
					b.Fatal(err)
				}
			}
			runParallel(b, conns, func(int, int) error {
				_, err := m.Send(ctx, msg)
				return err
			})
		})
	}
}

// BenchmarkRenderSend renders each of the example's digests and sends it
// over one pooled connection to a null server: allocs/op and B/op are per
// digest, both sides of the process's work (the server runs in-process, so
// its allocations count too).
func BenchmarkRenderSend(b *testing.B) {
	ds := smtp.SampleDigests(b)
	r, err := digest.NewRenderer()
	if err != nil {
		b.Fatal(err)
	}
	addr := startNullSMTP(b)
	m := newMailer(b, addr, nil)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		d := &ds[i%len(ds)]
		out, err := r.Render(d)
		if err != nil {
			b.Fatal(err)
		}
		msg := &digest.Message{Key: testKey("bench", 'a'), To: digest.Address{Name: d.Customer.Name, Email: "ada@example.net"},
			Subject: out.Subject, Text: out.Text, HTML: out.HTML}
		if _, err := m.Send(ctx, msg); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
