package bench

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// DelayProxy is a TCP proxy that puts a network distance between its
// clients and a server: every byte reaches the other side a fixed delay
// after the proxy read it, in each direction, so that a round trip takes
// twice that delay more than it would. It is a delay line per direction,
// not a sleep per read: a reader goroutine stamps each chunk it reads with
// its due time and queues it, and a writer goroutine writes each chunk
// when it is due, in order, while the reader goes on reading. Bytes keep
// their order and arrive spaced as they were sent; throughput is not
// capped by the delay (up to delayQueue chunks, each up to delayChunk
// bytes, are in flight per direction, the proxy's "window").
//
// The TCP handshake is not delayed (the client connects to the proxy at
// once, and the proxy to the server): a connection's set-up costs one
// round trip less than across a real distance, once per connection. A
// close (EOF) is passed on, as a half-close, when due like a byte.
type DelayProxy struct {
	l      net.Listener
	target string
	delay  time.Duration // one way
	up     atomic.Int64  // bytes delivered towards the server
	down   atomic.Int64  // bytes delivered towards the client
	conns  atomic.Int64  // connections accepted
	wg     sync.WaitGroup
	mu     sync.Mutex
	open   map[net.Conn]struct{}
	closed bool
}

// delayChunk is the most a delay line reads at once; delayQueue is how
// many chunks it holds in flight before its reader waits.
const (
	delayChunk = 64 << 10
	delayQueue = 4096
)

// StartDelayProxy listens on a loopback port and forwards each connection
// to target (HOST:PORT), delaying every byte by oneWay in each direction:
// a round trip through it takes 2×oneWay longer. oneWay must be positive.
func StartDelayProxy(target string, oneWay time.Duration) (*DelayProxy, error) {
	if oneWay <= 0 {
		return nil, fmt.Errorf("bench: delay proxy: delay %s: want positive", oneWay)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: delay proxy: %w", err)
	}
	p := &DelayProxy{l: l, target: target, delay: oneWay, open: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the proxy's address, HOST:PORT: connect here to reach the
// target at a distance.
func (p *DelayProxy) Addr() string { return p.l.Addr().String() }

// Forwarded returns the bytes delivered so far towards the server (up)
// and towards the clients (down), and the connections accepted.
func (p *DelayProxy) Forwarded() (up, down, conns int64) {
	return p.up.Load(), p.down.Load(), p.conns.Load()
}

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines to end.
func (p *DelayProxy) Close() error {
	err := p.l.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.open {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// track adds c to the open connections, or closes it and reports false
// when the proxy is closed.
func (p *DelayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.open[c] = struct{}{}
	return true
}

func (p *DelayProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
		delete(p.open, c)
	}
}

func (p *DelayProxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.l.Accept()
		if err != nil {
			return
		}
		p.conns.Add(1)
		if !p.track(client) {
			return
		}
		p.wg.Add(1)
		go p.relay(client)
	}
}

// relay connects client to the target through a delay line each way, and
// closes both connections once both lines have ended (or either failed).
func (p *DelayProxy) relay(client net.Conn) {
	defer p.wg.Done()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		p.untrack(client)
		return
	}
	if !p.track(server) {
		p.untrack(client)
		return
	}
	var lines sync.WaitGroup
	abort := func() { p.untrack(client, server) }
	lines.Go(func() { delayLine(client, server, p.delay, &p.up, abort) })
	lines.Go(func() { delayLine(server, client, p.delay, &p.down, abort) })
	lines.Wait()
	p.untrack(client, server)
}

// segment is a chunk read from a delay line's source and the time it is
// due at the destination; a nil b is the source's end.
type segment struct {
	b   []byte
	due time.Time
}

// delayLine copies src to dst, each chunk delay after it was read, and
// counts the bytes written into n. At src's end (EOF) it half-closes dst
// when that is due; when reading src fails otherwise, or writing dst
// fails, it calls abort (which closes both connections, so that the other
// line ends too).
func delayLine(src, dst net.Conn, delay time.Duration, n *atomic.Int64, abort func()) {
	q := make(chan segment, delayQueue)
	go func() {
		defer close(q)
		buf := make([]byte, delayChunk)
		for {
			k, err := src.Read(buf)
			if k > 0 {
				q <- segment{b: append([]byte(nil), buf[:k]...), due: time.Now().Add(delay)}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					q <- segment{due: time.Now().Add(delay)}
				} else {
					abort() // reset or closed: end the other line too
				}
				return
			}
		}
	}()
	timer := time.NewTimer(0)
	<-timer.C
	failed := false
	for s := range q {
		if failed {
			continue // drain, so that the reader ends
		}
		if wait := time.Until(s.due); wait > 0 {
			timer.Reset(wait)
			<-timer.C
		}
		if s.b == nil {
			if hc, ok := dst.(interface{ CloseWrite() error }); ok {
				_ = hc.CloseWrite()
			}
			continue
		}
		// Counted before the write, so that a peer that has read the
		// bytes finds them counted.
		n.Add(int64(len(s.b)))
		k, err := dst.Write(s.b)
		if err != nil {
			n.Add(int64(k - len(s.b)))
			failed = true
			abort()
		}
	}
}
