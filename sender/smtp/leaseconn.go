package smtp

import (
	"net"
	"os"
	"sync/atomic"
	"time"
)

// leaseConn is a connection whose deadlines never pass the deadline of
// the send in progress (the claim's lease, less a margin). go-mail sets
// its own deadline, now plus its timeout, when it dials, and the mailer
// again before each message (exchange): through this conn that deadline is cut to the
// lease, so a server that holds the end of DATA cannot keep the send
// going after the lease. Write also refuses once the lease deadline has
// passed, even before the runtime's deadline timer has fired: a process
// resumed after a freeze (SIGSTOP, a paused VM) writes nothing late.
type leaseConn struct {
	net.Conn
	cut atomic.Int64 // unix nanoseconds; 0: no send in progress, no cut
}

// limit sets the deadline of the send starting now (zero: none) and
// applies it at once.
func (c *leaseConn) limit(deadline time.Time) error {
	if deadline.IsZero() {
		c.cut.Store(0)
		return nil
	}
	c.cut.Store(deadline.UnixNano())
	return c.Conn.SetDeadline(deadline)
}

func (c *leaseConn) clamp(t time.Time) time.Time {
	cut := c.cut.Load()
	if cut != 0 && (t.IsZero() || t.UnixNano() > cut) {
		return time.Unix(0, cut)
	}
	return t
}

func (c *leaseConn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(c.clamp(t)) }
func (c *leaseConn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.clamp(t)) }
func (c *leaseConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.clamp(t)) }

func (c *leaseConn) Write(b []byte) (int, error) {
	if cut := c.cut.Load(); cut != 0 && time.Now().UnixNano() >= cut {
		return 0, os.ErrDeadlineExceeded
	}
	return c.Conn.Write(b)
}
