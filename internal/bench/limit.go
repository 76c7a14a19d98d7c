package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// LimitLoopEML is the limit reference process ("digest-bench
// limit-loop"): it sends the message in the file eml, count times, over
// conns connections to addr, with the least a client can do per message.
// It is what the sink can take at all, the ceiling the job's rate is
// measured against. The bytes are the file's, as they are: no fresh
// Message-ID or Date, nothing composed.
func LimitLoopEML(ctx context.Context, addr, eml string, count, conns int) (int, error) {
	raw, err := os.ReadFile(eml)
	if err != nil {
		return 0, err
	}
	from, to := envelopeOf(raw)
	sent, _, err := limitLoop(ctx, addr, conns, count, raw, from, to)
	return sent, err
}

// envelopeOf returns the From and first To address of message, the
// envelope the limit loop sends it with (the job sends each digest with
// its own; the lengths are alike). A message without them goes from and
// to fixed addresses: the sink accepts anything.
func envelopeOf(message []byte) (from, to string) {
	from, to = "digest@example.com", "customer@example.com"
	m, err := mail.ReadMessage(bytes.NewReader(message))
	if err != nil {
		return from, to
	}
	if a, err := mail.ParseAddress(m.Header.Get("From")); err == nil {
		from = a.Address
	}
	if l, err := mail.ParseAddressList(m.Header.Get("To")); err == nil && len(l) > 0 {
		to = l[0].Address
	}
	return from, to
}

// limitLoop sends message count times over conns connections to addr, as
// lean as SMTP allows and one message in flight per connection, like the
// job: with PIPELINING and CHUNKING, MAIL, RCPT and "BDAT n LAST" with the
// message in one write and their three replies read, one round trip per
// message; with PIPELINING alone, MAIL, RCPT and DATA in one write, then,
// after their replies, the message dot-stuffed with its final dot, two
// round trips (DATA's content may not go before the 354). Every write is
// prepared once per connection; a message costs a write and the reads of
// its replies. A server without PIPELINING is an error: the sink has it.
func limitLoop(ctx context.Context, addr string, conns, count int, message []byte, from, to string) (int, time.Duration, error) {
	// The connections are set up at once, as a pool that dials on demand
	// does: one after another, each greeting and EHLO would add its round
	// trips to the loop's time (1.2 s at 16 connections 50 ms away).
	clients := make([]*limitClient, conns)
	errs := make([]error, conns)
	var dials sync.WaitGroup
	for i := range clients {
		dials.Go(func() { clients[i], errs[i] = dialLimit(ctx, addr) })
	}
	dials.Wait()
	for _, c := range clients {
		if c != nil {
			defer c.close()
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, 0, fmt.Errorf("bench: limit loop: %w", err)
	}
	for _, c := range clients {
		c.prepare(message, from, to)
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
	for _, c := range clients {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < total && ctx.Err() == nil; i = next.Add(1) - 1 {
				if err := c.send(); err != nil {
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
		return int(sent.Load()), d, fmt.Errorf("bench: limit loop: %w", first)
	}
	return int(sent.Load()), d, ctx.Err()
}

// limitClient is one connection of the limit loop.
type limitClient struct {
	conn     net.Conn
	r        *bufio.Reader
	ext      map[string]bool // EHLO keywords
	envelope []byte          // the first write of each message
	content  []byte          // DATA only: the second write
	chunked  bool
}

func dialLimit(ctx context.Context, addr string) (*limitClient, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &limitClient{conn: conn, r: bufio.NewReaderSize(conn, 4096), ext: map[string]bool{}}
	if err := c.reply(220); err != nil {
		c.conn.Close()
		return nil, fmt.Errorf("greeting: %w", err)
	}
	if _, err := conn.Write([]byte("EHLO localhost\r\n")); err != nil {
		c.conn.Close()
		return nil, err
	}
	_, err = c.replyLines(250, func(text string) {
		if f := strings.Fields(text); len(f) > 0 {
			c.ext[strings.ToUpper(f[0])] = true
		}
	})
	if err != nil {
		c.conn.Close()
		return nil, fmt.Errorf("EHLO: %w", err)
	}
	if !c.ext["PIPELINING"] {
		c.conn.Close()
		return nil, errors.New("the server does not offer PIPELINING")
	}
	return c, nil
}

// prepare builds the writes of one message: with CHUNKING, the envelope
// and the message in one BDAT LAST; without, the envelope with DATA, and
// the message dot-stuffed with its final dot.
func (c *limitClient) prepare(message []byte, from, to string) {
	mailCmd := "MAIL FROM:<" + from + ">"
	if c.ext["8BITMIME"] {
		mailCmd += " BODY=8BITMIME"
	}
	env := mailCmd + "\r\nRCPT TO:<" + to + ">\r\n"
	c.chunked = c.ext["CHUNKING"]
	if c.chunked {
		b := append([]byte(env), "BDAT "+strconv.Itoa(len(message))+" LAST\r\n"...)
		c.envelope = append(b, message...)
		return
	}
	c.envelope = []byte(env + "DATA\r\n")
	c.content = dotStuff(message)
}

// dotStuff returns message as DATA's content (RFC 5321 4.5.2): a '.'
// before every line that starts with one, the last line ended, and the
// final dot. message ends its lines with CRLF.
func dotStuff(message []byte) []byte {
	out := make([]byte, 0, len(message)+len(message)/64+5)
	for len(message) > 0 {
		line := message
		if i := bytes.IndexByte(message, '\n'); i >= 0 {
			line = message[:i+1]
		}
		if line[0] == '.' {
			out = append(out, '.')
		}
		out = append(out, line...)
		message = message[len(line):]
	}
	if !bytes.HasSuffix(out, []byte("\r\n")) && len(out) > 0 {
		out = append(out, "\r\n"...)
	}
	return append(out, ".\r\n"...)
}

// send sends the prepared message once and reads every reply it asks for.
func (c *limitClient) send() error {
	if _, err := c.conn.Write(c.envelope); err != nil {
		return err
	}
	if err := c.reply(250); err != nil {
		return fmt.Errorf("MAIL: %w", err)
	}
	if err := c.reply(250); err != nil {
		return fmt.Errorf("RCPT: %w", err)
	}
	if c.chunked {
		if err := c.reply(250); err != nil {
			return fmt.Errorf("BDAT: %w", err)
		}
		return nil
	}
	if err := c.reply(354); err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	if _, err := c.conn.Write(c.content); err != nil {
		return err
	}
	if err := c.reply(250); err != nil {
		return fmt.Errorf("end of DATA: %w", err)
	}
	return nil
}

// reply reads one reply, all its lines, and checks its code.
func (c *limitClient) reply(code int) error {
	_, err := c.replyLines(code, nil)
	return err
}

// replyLines reads one reply and checks its code, handing each line's
// text after the first to each, when not nil. It returns the first line.
func (c *limitClient) replyLines(code int, each func(string)) (string, error) {
	first := ""
	for n := 0; ; n++ {
		l, err := c.r.ReadSlice('\n')
		if err != nil {
			return first, err
		}
		l = bytes.TrimRight(l, "\r\n")
		if len(l) < 3 || l[0]-'0' != byte(code/100) || l[1]-'0' != byte(code/10%10) || l[2]-'0' != byte(code%10) {
			return first, fmt.Errorf("reply %q, want %d", l, code)
		}
		var text []byte
		if len(l) > 4 {
			text = l[4:]
		}
		if n == 0 {
			first = string(text)
		} else if each != nil {
			each(string(text))
		}
		if len(l) == 3 || l[3] == ' ' {
			return first, nil
		}
	}
}

// close says QUIT, without waiting long for the reply, and closes.
func (c *limitClient) close() {
	_ = c.conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.conn.Write([]byte("QUIT\r\n")); err == nil {
		_ = c.reply(221)
	}
	_ = c.conn.Close()
}
