package smtp

import (
	"context"

	"github.com/weeklydigest/digest/digest"
)

var _ digest.UTF8Mailer = (*Mailer)(nil)

// SMTPUTF8 reports whether the server offers SMTPUTF8 (RFC 6531), which an
// address with a non-ASCII local part (jörg@example.com) needs: a server
// without it refuses such an RCPT TO, or mangles the address. An
// internationalized domain needs no such thing (it goes as its A-label).
// A run asks before it claims such an address, so that one the server
// cannot take is a bad record, counted and named, never a claim that
// fails at the server.
//
// It reads the EHLO reply of a pooled connection, dialling one when the
// pool has none open (the connection stays in the pool for the sends);
// the first answer is kept. Errors are those of a dial (see CheckConnection).
func (m *Mailer) SMTPUTF8(ctx context.Context) (bool, error) {
	m.utf8Mu.Lock()
	defer m.utf8Mu.Unlock()
	if m.utf8Known {
		return m.utf8, nil
	}
	var c *conn
	select {
	case c = <-m.slots:
	case <-m.done:
		return false, temporary(ErrClosed)
	case <-ctx.Done():
		return false, temporary(ctx.Err())
	}
	defer func() { m.slots <- c }()
	if c.smtp == nil {
		dctx, cancel := context.WithTimeout(ctx, m.timeout)
		defer cancel()
		if err := m.dial(dctx, c); err != nil {
			return false, dialError(m.addr, err)
		}
	}
	m.utf8, _ = c.smtp.Extension("SMTPUTF8")
	m.utf8Known = true
	return m.utf8, nil
}
