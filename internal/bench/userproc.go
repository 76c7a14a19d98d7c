package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"
	gomail "github.com/wneessen/go-mail"
)

// ServeNullSMTP is the null SMTP server process ("digest-bench
// null-smtp"): it accepts every message on addr and discards it. With keep
// set it keeps the first keepSample messages and writes the one of median
// size to the file keep (once keepSample have come, or at the first
// "count" after at least one): the message the plain loop sends, one real
// digest as long as the run's typical one, not whichever came first
// (digests are 6-10 KB, by their rows and language, and the plain loop's
// cost follows its message's size). It writes "listening ADDR" to out,
// then answers each "count" line of in with "count N cpu NS": the messages
// received so far and the CPU time (user + system, nanoseconds) the
// process used so far. It stops at the end of in. Without chunking it
// does not offer CHUNKING (RFC 3030), so that clients send the DATA way.
func ServeNullSMTP(addr, keep string, chunking bool, in io.Reader, out io.Writer) error {
	var count atomic.Int64
	kept := &keptSample{file: keep}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return keepingSession{count: &count, keep: kept.add}, nil
	}))
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	srv.MaxMessageBytes = 64 << 20
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("null SMTP server: %w", err)
	}
	if !chunking {
		l = noChunkingListener{l}
	}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	fmt.Fprintf(out, "listening %s\n", l.Addr())
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		switch sc.Text() {
		case "count":
			if err := kept.write(); err != nil {
				fmt.Fprintf(out, "error: %v\n", err)
				continue
			}
			fmt.Fprintf(out, "count %d cpu %d\n", count.Load(), processCPU())
		default:
			fmt.Fprintf(out, "error: unknown command %q\n", sc.Text())
		}
	}
	return sc.Err()
}

// noChunkingListener hands out connections that hide go-smtp's CHUNKING
// from the EHLO reply (go-smtp always offers it): the keyword becomes
// XHUNKING, which no client knows.
type noChunkingListener struct{ net.Listener }

func (l noChunkingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return noChunkingConn{c}, nil
}

type noChunkingConn struct{ net.Conn }

func (c noChunkingConn) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte("CHUNKING")) {
		b = bytes.ReplaceAll(b, []byte("CHUNKING"), []byte("XHUNKING"))
	}
	return c.Conn.Write(b)
}

// keepSample is how many messages the null server keeps to choose the
// plain loop's from: enough for a stable median, a few MiB at most.
const keepSample = 201

// keptSample holds the first keepSample messages until the median one is
// written to file.
type keptSample struct {
	file    string
	mu      sync.Mutex
	msgs    [][]byte
	written bool
}

// add keeps r's message while the sample is not full, and writes the
// median once it is. It reports whether it read r.
func (k *keptSample) add(r io.Reader) (bool, error) {
	if k.file == "" {
		return false, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.written || len(k.msgs) >= keepSample {
		return false, nil
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return true, err
	}
	k.msgs = append(k.msgs, b)
	if len(k.msgs) == keepSample {
		return true, k.writeLocked()
	}
	return true, nil
}

// write writes the median of what is kept, if it is not written yet.
func (k *keptSample) write() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.writeLocked()
}

func (k *keptSample) writeLocked() error {
	if k.file == "" || k.written || len(k.msgs) == 0 {
		return nil
	}
	k.written = true
	msgs := slices.Clone(k.msgs)
	slices.SortStableFunc(msgs, func(a, b []byte) int { return len(a) - len(b) })
	k.msgs = nil
	return os.WriteFile(k.file, msgs[len(msgs)/2], 0o600)
}

type keepingSession struct {
	count *atomic.Int64
	keep  func(io.Reader) (bool, error)
}

func (keepingSession) Reset()                               {}
func (keepingSession) Logout() error                        { return nil }
func (keepingSession) Mail(string, *smtp.MailOptions) error { return nil }
func (keepingSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s keepingSession) Data(r io.Reader) error {
	kept, err := s.keep(r)
	if !kept && err == nil {
		_, err = io.Copy(io.Discard, r)
	}
	if err == nil {
		s.count.Add(1)
	}
	return err
}

// nullProcess is the parent's handle on a null SMTP server process.
type nullProcess struct {
	cmd  *exec.Cmd
	addr string
	// proxy, when set, puts the server at a distance: senders dial its
	// address (dialAddr).
	proxy *DelayProxy
	in    io.WriteCloser
	out   *bufio.Scanner
	mu    sync.Mutex
}

func startNullProcess(self, keep string, sink Sink) (*nullProcess, error) {
	args := []string{"null-smtp", "--addr", "127.0.0.1:0", "--keep", keep}
	if sink == SinkNoChunking {
		args = append(args, "--no-chunking")
	}
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start the null SMTP server: %w", err)
	}
	n := &nullProcess{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	line, err := n.line()
	a, ok := strings.CutPrefix(line, "listening ")
	if err != nil || !ok {
		n.stop()
		return nil, fmt.Errorf("bench: null SMTP server said %q (%v)", line, err)
	}
	n.addr = a
	return n, nil
}

func (n *nullProcess) line() (string, error) {
	if !n.out.Scan() {
		if err := n.out.Err(); err != nil {
			return "", err
		}
		return "", errors.New("the null SMTP server exited")
	}
	return n.out.Text(), nil
}

// count returns the messages the server received so far and the CPU time
// its process used so far.
func (n *nullProcess) count() (int64, time.Duration, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, err := io.WriteString(n.in, "count\n"); err != nil {
		return 0, 0, fmt.Errorf("bench: null SMTP server: %w", err)
	}
	line, err := n.line()
	if err != nil {
		return 0, 0, fmt.Errorf("bench: null SMTP server: %w", err)
	}
	var msgs, cpu int64
	if _, err := fmt.Sscanf(line, "count %d cpu %d", &msgs, &cpu); err != nil {
		return 0, 0, fmt.Errorf("bench: null SMTP server said %q", line)
	}
	return msgs, time.Duration(cpu), nil
}

// dialAddr is the address senders connect to: the delay proxy's when
// there is one, else the server's own.
func (n *nullProcess) dialAddr() string {
	if n.proxy != nil {
		return n.proxy.Addr()
	}
	return n.addr
}

// proxied starts counting what the delay proxy forwards; the function it
// returns gives the bytes delivered towards the server and the
// connections accepted since (0, 0 without a proxy).
func (n *nullProcess) proxied() func() (bytes, conns int64) {
	if n.proxy == nil {
		return func() (int64, int64) { return 0, 0 }
	}
	up0, _, c0 := n.proxy.Forwarded()
	return func() (int64, int64) {
		up, _, c := n.proxy.Forwarded()
		return up - up0, c - c0
	}
}

func (n *nullProcess) stop() {
	if n.proxy != nil {
		_ = n.proxy.Close()
	}
	_ = n.in.Close()
	_ = n.cmd.Wait()
}

// PlainLoopEML is the plain loop process ("digest-bench plain-loop"): it
// sends the message in the file eml, count times, over conns connections
// to addr with go-mail, as any sender would (a fresh Message-ID and Date
// each time). Each worker parses the file once.
func PlainLoopEML(ctx context.Context, addr, eml string, count, conns int) (int, error) {
	raw, err := os.ReadFile(eml)
	if err != nil {
		return 0, err
	}
	sent, _, err := plainLoop(ctx, addr, conns, count, func() (func() (*gomail.Msg, error), error) {
		msg, err := gomail.EMLToMsgFromReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", eml, err)
		}
		return func() (*gomail.Msg, error) {
			msg.SetMessageID()
			msg.SetDate()
			return msg, nil
		}, nil
	})
	return sent, err
}
