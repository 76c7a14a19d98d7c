package faults

import (
	"bytes"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// proxy is a TCP proxy on a free loopback port in front of target. It can
// cut every open connection and refuse new ones (a server restart, seen
// from the client), and, for SMTP, cut a connection after the client sent
// a message's final dot and before the server's reply reaches the client:
// the message is stored, the client cannot know.
type proxy struct {
	t      testing.TB
	l      net.Listener
	target string

	// cutData, when set, is asked once per message (n counts from 1)
	// whether to drop the connection after its data. Set by startProxy,
	// before the first connection.
	cutData func(n int) bool
	// holdData, when set, says how long to hold each message's final dot
	// before the server sees it: a server slow to end DATA, which stores
	// the message late, whatever the client did meanwhile. Set by
	// startHoldingProxy.
	holdData func(n int) time.Duration

	down     atomic.Bool
	messages atomic.Int64 // message data terminators seen
	held     atomic.Int64 // message ends held (holdData)
	dataCuts atomic.Int64 // connections dropped after the data
	cuts     atomic.Int64 // connections cut by Cut
	refused  atomic.Int64 // connections refused while down

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// startProxy starts a proxy to target; cutData may be nil (see proxy).
func startProxy(t testing.TB, target string, cutData func(n int) bool) *proxy {
	t.Helper()
	return launchProxy(t, &proxy{target: target, cutData: cutData})
}

// startHoldingProxy starts a proxy to target that holds the end of each
// message's data for hold(n) (see proxy.holdData).
func startHoldingProxy(t testing.TB, target string, hold func(n int) time.Duration) *proxy {
	t.Helper()
	return launchProxy(t, &proxy{target: target, holdData: hold})
}

func launchProxy(t testing.TB, p *proxy) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.t, p.l, p.conns = t, l, map[net.Conn]struct{}{}
	go p.serve()
	t.Cleanup(func() {
		l.Close()
		p.Cut()
	})
	return p
}

func (p *proxy) Addr() string { return p.l.Addr().String() }

// Cut closes every open connection, both sides.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		p.cuts.Add(1)
	}
	clear(p.conns)
}

// SetDown makes the proxy close new connections at once (down) or forward
// them again.
func (p *proxy) SetDown(down bool) { p.down.Store(down) }

func (p *proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down.Load() {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

func (p *proxy) serve() {
	for {
		client, err := p.l.Accept()
		if err != nil {
			return
		}
		if p.down.Load() {
			p.refused.Add(1)
			client.Close()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client, server) {
			p.refused.Add(1)
			client.Close()
			server.Close()
			continue
		}
		go p.pipe(client, server)
	}
}

func (p *proxy) pipe(client, server net.Conn) {
	defer p.untrack(client, server)
	var cutNext atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.upstream(client, server, &cutNext)
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			if cutNext.Load() {
				// The server answered the final dot: the message is
				// stored. The client never hears it.
				p.dataCuts.Add(1)
				client.Close()
				server.Close()
				break
			}
			if _, werr := client.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	client.Close()
	server.Close()
	<-done
}

// upstream copies client to server. With cutData set it follows the SMTP
// dialogue: after a DATA command, the message runs to CRLF.CRLF.
func (p *proxy) upstream(client, server net.Conn, cutNext *atomic.Bool) {
	if p.cutData == nil && p.holdData == nil {
		_, _ = io.Copy(server, client)
		server.Close()
		return
	}
	var line []byte // the command line being read
	var tail []byte // the last bytes of message data, across reads
	inData := false
	buf := make([]byte, 32<<10)
	for {
		n, err := client.Read(buf)
		chunk := buf[:n]
		var hold time.Duration
		for i := 0; i < len(chunk); {
			if !inData {
				j := bytes.IndexByte(chunk[i:], '\n')
				if j < 0 {
					line = append(line, chunk[i:]...)
					break
				}
				line = append(line, chunk[i:i+j+1]...)
				i += j + 1
				if strings.EqualFold(strings.TrimSpace(string(line)), "DATA") {
					inData, tail = true, []byte("\r\n")
				}
				line = line[:0]
				continue
			}
			// Message data: look for CRLF.CRLF, the data's first line
			// counting as if after a CRLF.
			window := append(tail, chunk[i:]...)
			if k := bytes.Index(window, []byte("\r\n.\r\n")); k >= 0 {
				consumed := k + 5 - len(tail)
				i += consumed
				inData, tail = false, nil
				m := int(p.messages.Add(1))
				if p.cutData != nil && p.cutData(m) {
					cutNext.Store(true)
				}
				if p.holdData != nil {
					hold = max(hold, p.holdData(m))
				}
				continue
			}
			if len(window) > 4 {
				tail = append([]byte(nil), window[len(window)-4:]...)
			} else {
				tail = append([]byte(nil), window...)
			}
			break
		}
		if hold > 0 {
			p.held.Add(1)
			time.Sleep(hold) // the slow server itself, not a wait for a goroutine
		}
		if n > 0 {
			if _, werr := server.Write(chunk); werr != nil {
				return
			}
		}
		if err != nil {
			server.Close()
			return
		}
	}
}
