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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"
	gomail "github.com/wneessen/go-mail"
)

// ServeNullSMTP is the null SMTP server process ("digest-bench
// null-smtp"): it accepts every message on addr and discards it, keeping
// the first one in the file keepFirst when set. It writes "listening
// ADDR" to out, then answers each "count" line of in with "count N cpu
// NS": the messages received so far and the CPU time (user + system,
// nanoseconds) the process used so far. It stops at the end of in.
func ServeNullSMTP(addr, keepFirst string, in io.Reader, out io.Writer) error {
	var (
		count atomic.Int64
		kept  atomic.Bool
	)
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return keepingSession{count: &count, keep: func(r io.Reader) (bool, error) {
			if keepFirst == "" || !kept.CompareAndSwap(false, true) {
				return false, nil
			}
			b, err := io.ReadAll(r)
			if err == nil {
				err = os.WriteFile(keepFirst, b, 0o600)
			}
			return true, err
		}}, nil
	}))
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	srv.MaxMessageBytes = 64 << 20
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("null SMTP server: %w", err)
	}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	fmt.Fprintf(out, "listening %s\n", l.Addr())
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		switch sc.Text() {
		case "count":
			fmt.Fprintf(out, "count %d cpu %d\n", count.Load(), processCPU())
		default:
			fmt.Fprintf(out, "error: unknown command %q\n", sc.Text())
		}
	}
	return sc.Err()
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
	in   io.WriteCloser
	out  *bufio.Scanner
	mu   sync.Mutex
}

func startNullProcess(self, keepFirst string) (*nullProcess, error) {
	cmd := exec.Command(self, "null-smtp", "--addr", "127.0.0.1:0", "--keep-first", keepFirst)
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

func (n *nullProcess) stop() {
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
