//go:build !unix

package smtp

import "net"

// peerClosed cannot peek at a socket here: it never knows.
func peerClosed(net.Conn) (closed, known bool) { return false, false }
