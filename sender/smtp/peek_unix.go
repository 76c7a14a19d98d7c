//go:build unix

package smtp

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the server closed c (or reset it, or sent
// something unasked, such as a 421) while it sat in the pool: one
// non-blocking peek at the socket (MSG_PEEK|MSG_DONTWAIT: nothing is
// consumed, nothing waits). known is false when it cannot tell.
func peerClosed(c net.Conn) (closed, known bool) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, false
	}
	var (
		buf  [1]byte
		perr error
	)
	if err := rc.Read(func(fd uintptr) bool {
		_, _, perr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); err != nil {
		return false, false
	}
	switch {
	case errors.Is(perr, syscall.EAGAIN), errors.Is(perr, syscall.EWOULDBLOCK), errors.Is(perr, syscall.EINTR):
		return false, true // open, nothing waiting: the normal case
	case perr != nil:
		return true, true // reset
	}
	// Nothing read: the server's FIN; a byte: it spoke unasked (a 421,
	// a TLS alert). The connection is unusable either way.
	return true, true
}
