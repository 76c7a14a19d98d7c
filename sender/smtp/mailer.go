package smtp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"
	gosmtp "github.com/wneessen/go-mail/smtp"
	"golang.org/x/time/rate"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender"
)

// Defaults for Config.
const (
	DefaultConcurrency = 4
	// DefaultTimeout bounds dialling and, separately, one message's
	// exchange. A send may so take twice it (WorstCase), and a claim's
	// lease must cover that: short enough for a lease of tens of seconds,
	// long enough for a provider across the internet.
	DefaultTimeout = 8 * time.Second
	maxRefLen      = 200
)

// ErrClosed is returned by Send after Close.
var ErrClosed = errors.New("mailer is closed")

// Config configures an Mailer. The zero value of each optional
// field means its default.
type Config struct {
	// SMTP says where to connect (see ParseSMTPURL). Required.
	SMTP Server
	// Password, when set, replaces SMTP.Password: the content of
	// DIGEST_SMTP_PASSWORD_FILE (see ReadSecretFile), so the secret need not
	// be in the URL.
	Password string
	// From is the sender of every message; its domain is the right-hand
	// side of every Message-ID. Required, validated.
	From digest.Address
	// ListUnsubscribe, when set, is the List-Unsubscribe header value as is,
	// e.g. "<mailto:unsubscribe@example.com>, <https://example.com/u>".
	ListUnsubscribe string
	// Concurrency is the number of persistent connections, and so of
	// messages in flight at once. Default DefaultConcurrency.
	Concurrency int
	// Timeout bounds connecting (TCP, TLS, EHLO, AUTH) and, separately, the
	// whole SMTP exchange of each message. Default DefaultTimeout. A send
	// whose context has a deadline (the claim's lease) is also cut off at
	// that deadline, connection included.
	Timeout time.Duration
	// TLSConfig is used for STARTTLS and implicit TLS. Default: verify the
	// server's certificate for SMTP.Host, TLS 1.2 or later.
	TLSConfig *tls.Config
	// Limiter is the process's one send limiter (NewLimiter); each message
	// waits for a token after getting its connection, right before it is
	// sent. Nil means unlimited.
	Limiter *rate.Limiter
	// HELO is the name announced in EHLO. Default: the host name.
	HELO string
	// Logger receives reconnects and errors after acceptance. Default: discard.
	Logger *slog.Logger
	// Now stamps the Date header. Default time.Now.
	Now func() time.Time
}

// Mailer sends digests over a small pool of persistent SMTP
// connections. It is a digest.Mailer; Send is safe for concurrent use.
type Mailer struct {
	client  *gomail.Client
	env     sender.Envelope
	limiter *rate.Limiter
	log     *slog.Logger
	now     func() time.Time
	addr    string
	timeout time.Duration

	slots     chan *conn
	done      chan struct{}
	closeOnce sync.Once

	utf8Mu    sync.Mutex // guards the SMTPUTF8 answer
	utf8Known bool
	utf8      bool
}

var _ digest.Mailer = (*Mailer)(nil)

// conn is one pooled connection; smtp is nil until dialled and after an
// error, when the next Send dials again.
type conn struct {
	smtp *gosmtp.Client
	raw  *leaseConn
	used time.Time // the end of its last successful exchange (Config.Now)
}

// NewMailer validates cfg and returns a mailer. It does not connect:
// each connection is made on first use and again after any error.
func NewMailer(cfg Config) (*Mailer, error) {
	env, err := sender.NewEnvelope(cfg.From, cfg.ListUnsubscribe)
	if err != nil {
		return nil, fmt.Errorf("mailer config: %w", err)
	}
	if cfg.SMTP.Host == "" || cfg.SMTP.Port < 1 || cfg.SMTP.Port > 65535 {
		return nil, errors.New("mailer config: SMTP host and port are required (see ParseSMTPURL)")
	}
	if cfg.Concurrency < 0 || cfg.Timeout < 0 {
		return nil, errors.New("mailer config: concurrency and timeout must not be negative")
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Password != "" {
		cfg.SMTP.Password = cfg.Password
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Limiter == nil {
		cfg.Limiter = rate.NewLimiter(rate.Inf, 0)
	}
	tlsConfig := cfg.TLSConfig
	if tlsConfig == nil {
		tlsConfig = &tls.Config{ServerName: cfg.SMTP.Host, MinVersion: tls.VersionTLS12}
	}
	client, err := gomail.NewClient(cfg.SMTP.Host, clientOptions(cfg, tlsConfig)...)
	if err != nil {
		// go-mail's option errors name values, never the password.
		return nil, fmt.Errorf("mailer config: %w", err)
	}
	m := &Mailer{
		client:  client,
		env:     env,
		limiter: cfg.Limiter,
		log:     cfg.Logger,
		now:     cfg.Now,
		addr:    cfg.SMTP.Addr(),
		timeout: cfg.Timeout,
		slots:   make(chan *conn, cfg.Concurrency),
		done:    make(chan struct{}),
	}
	for range cfg.Concurrency {
		m.slots <- &conn{}
	}
	return m, nil
}

// WorstCase is the longest one Send can take once it has its token: a
// dial and a message exchange, each bounded by the timeout. A claim's
// lease must leave at least this much when the send starts.
func (m *Mailer) WorstCase() time.Duration { return 2 * m.timeout }

// WorstCase is Mailer.WorstCase for a configured timeout (0: the
// default), for checking a lease before any mailer exists.
func WorstCase(timeout time.Duration) time.Duration {
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	return 2 * timeout
}

// dialState carries, through go-mail's dial, where to record the raw
// connection and the deadline of the send that dials.
type dialState struct {
	raw      **leaseConn
	deadline time.Time
}

type rawConnKey struct{}

func clientOptions(cfg Config, tlsConfig *tls.Config) []gomail.Option {
	s := cfg.SMTP
	policy := gomail.TLSMandatory
	switch s.TLS {
	case TLSOpportunistic:
		policy = gomail.TLSOpportunistic
	case TLSNone, TLSImplicit: // implicit TLS is done by dial below, not by STARTTLS
		policy = gomail.NoTLS
	}
	netDialer := &net.Dialer{}
	dial := netDialer.DialContext
	if s.TLS == TLSImplicit {
		dial = (&tls.Dialer{NetDialer: netDialer, Config: tlsConfig}).DialContext
	}
	opts := []gomail.Option{
		gomail.WithPort(s.Port),
		gomail.WithTimeout(cfg.Timeout),
		gomail.WithTLSPolicy(policy),
		gomail.WithTLSConfig(tlsConfig),
		// The dialler records the net.Conn so that a cancelled context can
		// interrupt a send in progress, and a broken connection be closed,
		// and wraps it so that no deadline go-mail sets passes the send's
		// (see leaseConn); from the first byte, since EHLO, STARTTLS and
		// AUTH follow the dial inside go-mail.
		gomail.WithDialContextFunc(func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			lc := &leaseConn{Conn: c}
			if st, ok := ctx.Value(rawConnKey{}).(dialState); ok {
				*st.raw = lc
				if err := lc.limit(st.deadline); err != nil {
					_ = c.Close()
					return nil, err
				}
			}
			return lc, nil
		}),
	}
	if cfg.HELO != "" {
		opts = append(opts, gomail.WithHELO(cfg.HELO))
	}
	if s.Username != "" {
		opts = append(opts, gomail.WithUsername(s.Username), gomail.WithPassword(s.Password))
		auth := map[AuthMethod]gomail.SMTPAuthType{
			AuthAuto: gomail.SMTPAuthAutoDiscover, AuthPlain: gomail.SMTPAuthPlain, AuthLogin: gomail.SMTPAuthLogin,
			AuthCRAMMD5: gomail.SMTPAuthCramMD5, AuthXOAuth2: gomail.SMTPAuthXOAUTH2,
		}[s.Auth]
		if auth != "" {
			opts = append(opts, gomail.WithSMTPAuth(auth))
		}
	}
	return opts
}

// Send sends m once over a pooled connection and returns the server's reply
// to the end of DATA (e.g. "2.0.0 Ok: queued as 4F2A1") as the reference,
// or the Message-ID when the server said nothing more. Errors are
// *digest.SendError; see classifySMTP for the classes.
func (m *Mailer) Send(ctx context.Context, dm *digest.Message) (string, error) {
	l, err := m.env.Letter(dm, m.now())
	if err != nil {
		return "", err
	}
	defer l.Release()
	var c *conn
	select {
	case c = <-m.slots:
	case <-m.done:
		return "", temporary(ErrClosed)
	case <-ctx.Done():
		return "", temporary(ctx.Err())
	}
	defer func() { m.slots <- c }()
	select {
	case <-m.done:
		return "", temporary(ErrClosed)
	default:
	}
	// Wait for the token holding the connection, so that the token's time
	// is the send's time and the rate holds at the server.
	deadline, bounded := ctx.Deadline()
	if err := m.limiter.Wait(ctx); err != nil {
		if bounded && !errors.Is(ctx.Err(), context.Canceled) {
			// The token comes after the deadline (Wait says so without
			// waiting), or the deadline passed while waiting.
			return "", temporary(fmt.Errorf("%w: rate limit: %w", digest.ErrNoTime, err))
		}
		return "", temporary(fmt.Errorf("rate limit: %w", err))
	}
	// Start only a send that can end before the deadline by its timeouts
	// alone; the deadline then only cuts a send that stalls.
	if left := time.Until(deadline); bounded && left < m.WorstCase() {
		return "", temporary(fmt.Errorf("%w (%s left, a send may take %s)", digest.ErrNoTime, left.Round(time.Millisecond), m.WorstCase()))
	}
	return m.sendOn(ctx, c, l)
}

// idleCheck is how long a pooled connection may stay unused before the
// next message checks it with NOOP first. A connection used more recently
// sends MAIL at once: a server that closed it meanwhile fails MAIL with no
// reply, which is as unambiguous as a failed NOOP (see sendOn).
const idleCheck = 30 * time.Second

// chunkIdle is how long a pooled connection may stay unused and still
// carry its next message as BDAT (sendChunked). BDAT writes the content
// with MAIL, so a server that closed the connection while it was idle,
// without a 421, cannot be told from one that took the message and lost
// its reply: the send is ambiguous (a look-up, or a hold). A connection
// idle longer sends the DATA way (sendEnvelope), where such a close fails
// MAIL before any content went out and the message goes on a new
// connection. In a run, connections are reused within milliseconds.
const chunkIdle = time.Second

// sendOn sends l on c, dialling when c has no connection. Before BDAT on
// a pooled connection it peeks at the socket (peerClosed,
// no round trip): a server that closed the connection while it sat in the
// pool, silently, would otherwise get the whole message written into a
// closed socket, and the EOF that follows, with no reply, could not be
// told from a server that took the message and lost its replies
// (docs/design.md, "BDAT on a reused connection"). Found closed, the
// connection is replaced and the message goes the DATA way on the new one.
func (m *Mailer) sendOn(ctx context.Context, c *conn, l *sender.Letter) (string, error) {
	dataWay := false // set once a pooled connection was found closed
	for {
		if err := ctx.Err(); err != nil {
			return "", temporary(err)
		}
		fresh := c.smtp == nil
		if fresh {
			if err := m.dial(ctx, c); err != nil {
				return "", dialError(m.addr, err)
			}
		}
		raw := c.raw
		deadline, bounded := ctx.Deadline()
		idle := m.now().Sub(c.used)
		chunkOK := !dataWay && (fresh || idle < chunkIdle)
		if !fresh && chunkOK && m.closedWhileIdle(c) {
			m.drop(c)
			if left := time.Until(deadline); bounded && left < m.WorstCase() {
				return "", temporary(fmt.Errorf("%w (pooled connection closed by the server; %s left, a send may take %s)", digest.ErrNoTime, left.Round(time.Millisecond), m.WorstCase()))
			}
			m.log.DebugContext(ctx, "smtp connection closed by the server while pooled; reconnecting, sending the DATA way", "addr", m.addr)
			dataWay = true
			continue
		}
		if err := raw.limit(deadline); err != nil {
			m.drop(c)
			return "", temporary(fmt.Errorf("set deadline: %w", err))
		}
		stop := context.AfterFunc(ctx, func() { _ = raw.SetDeadline(time.Unix(1, 0)) })
		ref, stage, err := m.exchange(c.smtp, l, !fresh && idle >= idleCheck, chunkOK)
		stop()
		_ = raw.limit(time.Time{})
		if err == nil {
			c.used = m.now()
			return ref, nil
		}
		m.drop(c)
		if !fresh && reusable(stage, err) {
			// The server closed the pooled connection (or is closing it: 421)
			// before the message's content went out: nothing was sent, so the
			// same message may go on a new connection, if the lease leaves
			// the time a send may take. With BDAT the content went out with
			// MAIL, so only a 421 to MAIL or RCPT gets here, and only when
			// that refusal left nothing to deliver, or a write that failed
			// before the chunk's last byte (sendChunked); a lost reply
			// there is ambiguous, never reusable. After a failed BDAT
			// write the retry goes the DATA way.
			if left := time.Until(deadline); bounded && left < m.WorstCase() {
				return "", temporary(fmt.Errorf("%w (stale connection; %s left, a send may take %s)", digest.ErrNoTime, left.Round(time.Millisecond), m.WorstCase()))
			}
			m.log.DebugContext(ctx, "smtp connection went stale; reconnecting", "addr", m.addr, "stage", stage.String())
			dataWay = dataWay || bdatStage(err) != ""
			continue
		}
		// go-mail's errors may hold the recipient's address: debug only.
		m.log.DebugContext(ctx, "smtp send failed", "addr", m.addr, "stage", stage.String(), "err", err)
		return "", classifySMTP(stage, err)
	}
}

// exchange sends l on client: NOOP first when check is set, then MAIL,
// RCPT and DATA (in one write when the server has PIPELINING: sendEnvelope)
// and the content, or, when it also has CHUNKING and chunkOK is set (a
// fresh connection, or one used within chunkIdle), MAIL, RCPT and the
// content in one BDAT, all in one write (sendChunked), and returns the server's reply to the end of DATA as
// the reference, or the stage that failed and its error. It is
// go-mail's Client.Send without its per-message NOOP and its RSET after
// each message: a completed DATA ends the transaction (RFC 5321 4.1.1.4),
// so the next MAIL needs no RSET; and after any failure the connection is
// dropped, never reset and reused. And the content is composed once, by
// composeLetter rather than go-mail's Msg.WriteTo (the same bytes),
// dot-stuffed, and written whole (sendData), not a byte at a time through
// go-mail's DATA writer.
func (m *Mailer) exchange(client *gosmtp.Client, l *sender.Letter, check, chunkOK bool) (string, gomail.SendErrReason, error) {
	if check {
		if err := client.Noop(); err != nil {
			return "", gomail.ErrConnCheck, err
		}
	}
	// The message's own timeout, cut to the send's deadline by leaseConn.
	if err := client.UpdateDeadline(m.timeout); err != nil {
		return "", gomail.ErrConnCheck, err
	}
	from, rcpts := l.Sender(), l.Rcpts()
	// The content is composed before MAIL, in the encoding this server
	// takes, so that the server's transaction is not held open while it is
	// and the content goes out in one write.
	eightBitMIME, _ := client.Extension("8BITMIME")
	pipelining, _ := client.Extension("PIPELINING")
	chunking, _ := client.Extension("CHUNKING")
	chunked := pipelining && chunking && chunkOK // see chunkIdle
	content, err := composeLetter(l, eightBitMIME, chunked)
	if err != nil {
		return "", gomail.ErrWriteContent, err
	}
	defer putDataBuffer(content)
	var (
		reply string
		stage gomail.SendErrReason
	)
	switch {
	case chunked:
		// The commands and the content in one write, and one round trip
		// in all (sendChunked); but then a reply lost, even MAIL's, is
		// ambiguous.
		reply, stage, err = sendChunked(client.Text, mailCommand(client, from), rcpts, content.b)
	case pipelining:
		// MAIL, RCPT and DATA in one write: one round trip, not three,
		// before the content (sendEnvelope).
		if stage, err := sendEnvelope(client.Text, mailCommand(client, from), rcpts); err != nil {
			return "", stage, err
		}
		reply, stage, err = sendContent(client.Text, content.b)
	default:
		if err := client.Mail(from); err != nil {
			return "", gomail.ErrSMTPMailFrom, err
		}
		for _, rcpt := range rcpts {
			if err := client.Rcpt(rcpt); err != nil {
				return "", gomail.ErrSMTPRcptTo, err
			}
		}
		reply, stage, err = sendData(client.Text, content.b)
	}
	if err != nil {
		return "", stage, err
	}
	return reference(reply, l.MessageID()), 0, nil
}

func (m *Mailer) dial(ctx context.Context, c *conn) error {
	var raw *leaseConn
	deadline, _ := ctx.Deadline()
	client, err := m.client.DialToSMTPClientWithContext(context.WithValue(ctx, rawConnKey{}, dialState{raw: &raw, deadline: deadline}))
	if err != nil {
		if raw != nil {
			_ = raw.Close()
		}
		return err
	}
	c.smtp, c.raw = client, raw
	return nil
}

// closedWhileIdle reports whether the server closed pooled connection c
// (or spoke unasked) since its last exchange: bytes left unread in the
// client's buffer, or a FIN, reset or bytes waiting at the socket.
func (m *Mailer) closedWhileIdle(c *conn) bool {
	if c.smtp.Text.R.Buffered() > 0 {
		return true
	}
	closed, _ := peerClosed(c.raw.Conn)
	return closed
}

// drop closes a connection in an unknown state without QUIT.
func (m *Mailer) drop(c *conn) {
	if c.raw != nil {
		_ = c.raw.Close()
	}
	c.smtp, c.raw = nil, nil
}

func reference(reply, messageID string) string {
	ref := sender.HeaderText(reply)
	if ref == "" {
		ref = messageID
	}
	if len(ref) > maxRefLen {
		ref = ref[:maxRefLen]
	}
	return ref
}

// Close waits for sends in flight, then says QUIT on every connection,
// all at once: the replies are awaited together, so that closing C
// connections to a server RTT away takes one round trip, not C. Later
// Sends fail with ErrClosed (temporary).
func (m *Mailer) Close() error {
	var errs []error
	m.closeOnce.Do(func() {
		close(m.done)
		all := make([]*conn, 0, cap(m.slots))
		for range cap(m.slots) {
			all = append(all, <-m.slots)
		}
		errs = make([]error, len(all))
		var wg sync.WaitGroup
		for i, c := range all {
			if c.smtp == nil {
				continue
			}
			wg.Go(func() {
				if err := c.smtp.UpdateDeadline(5 * time.Second); err == nil {
					errs[i] = c.smtp.Quit()
				}
				m.drop(c)
			})
		}
		wg.Wait()
		for _, c := range all {
			m.slots <- c
		}
	})
	return errors.Join(errs...)
}
