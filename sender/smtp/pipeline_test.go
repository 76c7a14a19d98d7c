package smtp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/weeklydigest/digest/digest"
)

// The MAIL command sent pipelined is the one go-mail's Client.Mail sends
// on a client dialled with the mailer's own options, whatever the server
// offers: 8BITMIME, SMTPUTF8, DSN (whose RET go-mail adds only when told).
func TestMailCommandIsGoMails(t *testing.T) {
	t.Parallel()
	cases := []struct {
		ext  []string
		want string
	}{
		{nil, "MAIL FROM:<digest@example.com>"},
		{[]string{"8BITMIME"}, "MAIL FROM:<digest@example.com> BODY=8BITMIME"},
		{[]string{"SMTPUTF8"}, "MAIL FROM:<digest@example.com> SMTPUTF8"},
		{[]string{"PIPELINING", "8BITMIME", "SMTPUTF8", "DSN", "ENHANCEDSTATUSCODES"}, "MAIL FROM:<digest@example.com> BODY=8BITMIME SMTPUTF8"},
	}
	for _, c := range cases {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		mailLine := make(chan string, 1)
		go func() {
			defer l.Close()
			conn, err := l.Accept()
			if err != nil {
				mailLine <- err.Error()
				return
			}
			defer conn.Close()
			r := bufio.NewReader(conn)
			_, _ = io.WriteString(conn, "220 localhost ESMTP\r\n")
			_, _ = r.ReadString('\n') // EHLO
			ehlo := "250-localhost\r\n"
			for _, e := range c.ext {
				ehlo += "250-" + e + "\r\n"
			}
			_, _ = io.WriteString(conn, ehlo+"250 HELP\r\n")
			line, _ := r.ReadString('\n')
			mailLine <- strings.TrimSuffix(line, "\r\n")
			_, _ = io.WriteString(conn, "250 ok\r\n")
			_, _ = r.ReadString('\n')
		}()
		smtpCfg, err := ParseSMTPURL("smtp://" + l.Addr().String() + "?tls=none")
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewMailer(Config{SMTP: smtpCfg, From: digest.Address{Name: "Weekly Digest", Email: "digest@example.com"}, HELO: "localhost", Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := m.env.GoMailMsg(&digest.Message{Key: digest.Key("k1:" + strings.Repeat("a", 64)), To: digest.Address{Email: "ada@example.net"},
			Subject: "s", Text: "t"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		from, err := msg.GetSender(false)
		if err != nil {
			t.Fatal(err)
		}
		client, err := m.client.DialToSMTPClientWithContext(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ours := mailCommand(client, from)
		if err := client.Mail(from); err != nil {
			t.Fatal(err)
		}
		gomails := <-mailLine
		_ = client.Close()
		if ours != gomails || ours != c.want {
			t.Errorf("EHLO %v: mailCommand = %q, go-mail sent %q, want %q", c.ext, ours, gomails, c.want)
		}
	}
}

// writeCounter counts the writes that reach the connection.
type writeCounter struct {
	net.Conn
	writes atomic.Int64
}

func (w *writeCounter) Write(b []byte) (int, error) {
	w.writes.Add(1)
	return w.Conn.Write(b)
}

// envelopeServer is the server's side of sendEnvelope on a pipe: it reads
// the commands (MAIL, RCPT, DATA) before it answers any, then writes
// replies and, when after is set, reads one more line (the end of a
// message DATA took) and answers it with after. It closes the pipe when
// replies are exhausted (or at once, when closeAt is the number of replies
// written first) and returns the lines it read.
type envelopeServer struct {
	replies []string
	closeAt int // close after this many replies; -1: never early
	after   string
}

func (s envelopeServer) run(conn net.Conn, commands int) []string {
	defer conn.Close()
	r := bufio.NewReader(conn)
	var lines []string
	for range commands {
		line, err := r.ReadString('\n')
		if err != nil {
			return lines
		}
		lines = append(lines, line)
	}
	for i, reply := range s.replies {
		if i == s.closeAt {
			return lines
		}
		_, _ = io.WriteString(conn, reply)
	}
	if s.after != "" {
		line, err := r.ReadString('\n')
		if err != nil {
			return lines
		}
		lines = append(lines, line)
		_, _ = io.WriteString(conn, s.after)
	}
	return lines
}

// sendEnvelope's outcomes, as classifySMTP reads them: the first failing
// reply decides the stage and the class; no failure is ambiguous, since
// no content went out; the commands go in one write, and a 354 after a
// failure gets only the final dot.
func TestSendEnvelope(t *testing.T) {
	t.Parallel()
	const (
		mailCmd = "MAIL FROM:<digest@example.com> BODY=8BITMIME"
		rcpt    = "<ada@example.net>"
	)
	commands := []string{mailCmd + "\r\n", "RCPT TO:" + rcpt + "\r\n", "DATA\r\n"}
	cases := []struct {
		name      string
		srv       envelopeServer
		wantStage gomail.SendErrReason // 0: success
		wantCode  int
		wantClass digest.SendClass
		wantLines []string // what the server read after the commands
		writes    int64
	}{
		{name: "accepted", srv: envelopeServer{replies: []string{"250 ok\r\n", "250 ok\r\n", "354 go ahead\r\n"}, closeAt: -1}, writes: 1},
		{name: "MAIL refused", srv: envelopeServer{replies: []string{"550 5.7.1 no\r\n", "503 5.5.1 MAIL first\r\n", "503 5.5.1 MAIL first\r\n"}, closeAt: -1},
			wantStage: gomail.ErrSMTPMailFrom, wantCode: 550, wantClass: digest.SendPermanent, writes: 1},
		{name: "MAIL deferred", srv: envelopeServer{replies: []string{"451 4.3.0 later\r\n", "503 5.5.1 MAIL first\r\n", "503 5.5.1 MAIL first\r\n"}, closeAt: -1},
			wantStage: gomail.ErrSMTPMailFrom, wantCode: 451, wantClass: digest.SendTemporary, writes: 1},
		{name: "RCPT refused", srv: envelopeServer{replies: []string{"250 ok\r\n", "550 5.1.1 unknown\r\n", "554 5.5.1 no valid recipients\r\n"}, closeAt: -1},
			wantStage: gomail.ErrSMTPRcptTo, wantCode: 550, wantClass: digest.SendPermanent, writes: 1},
		{name: "RCPT deferred", srv: envelopeServer{replies: []string{"250 ok\r\n", "450 4.2.1 busy\r\n", "554 5.5.1 no valid recipients\r\n"}, closeAt: -1},
			wantStage: gomail.ErrSMTPRcptTo, wantCode: 450, wantClass: digest.SendTemporary, writes: 1},
		{name: "DATA refused", srv: envelopeServer{replies: []string{"250 ok\r\n", "250 ok\r\n", "554 5.3.4 no\r\n"}, closeAt: -1},
			wantStage: gomail.ErrSMTPData, wantCode: 554, wantClass: digest.SendPermanent, writes: 1},
		{name: "354 after RCPT refused", srv: envelopeServer{replies: []string{"250 ok\r\n", "550 5.1.1 unknown\r\n", "354 go ahead\r\n"}, closeAt: -1,
			after: "554 5.5.1 no valid recipients\r\n"},
			wantStage: gomail.ErrSMTPRcptTo, wantCode: 550, wantClass: digest.SendPermanent, wantLines: []string{".\r\n"}, writes: 2},
		{name: "closed before any reply", srv: envelopeServer{closeAt: 0},
			wantStage: gomail.ErrSMTPMailFrom, wantClass: digest.SendTemporary, writes: 1},
		{name: "closed after MAIL's reply", srv: envelopeServer{replies: []string{"250 ok\r\n"}, closeAt: 1},
			wantStage: gomail.ErrSMTPRcptTo, wantClass: digest.SendTemporary, writes: 1},
		{name: "closed after RCPT refused", srv: envelopeServer{replies: []string{"250 ok\r\n", "550 5.1.1 unknown\r\n"}, closeAt: 2},
			wantStage: gomail.ErrSMTPRcptTo, wantCode: 550, wantClass: digest.SendPermanent, writes: 1},
		{name: "closed before DATA's reply", srv: envelopeServer{replies: []string{"250 ok\r\n", "250 ok\r\n"}, closeAt: 2},
			wantStage: gomail.ErrSMTPData, wantClass: digest.SendTemporary, writes: 1},
	}
	for _, c := range cases {
		client, server := net.Pipe()
		wc := &writeCounter{Conn: client}
		read := make(chan []string, 1)
		go func() { read <- c.srv.run(server, len(commands)) }()
		stage, err := sendEnvelope(textproto.NewConn(wc), mailCmd, []string{rcpt})
		_ = client.Close()
		lines := <-read
		switch {
		case c.wantStage == 0 && err != nil:
			t.Errorf("%s: sendEnvelope = %v at %v; want success", c.name, err, stage)
		case c.wantStage != 0 && (err == nil || stage != c.wantStage):
			t.Errorf("%s: sendEnvelope failed at %v (%v), want at %v", c.name, stage, err, c.wantStage)
		case c.wantStage != 0:
			if code, _ := replyCode(err); code != c.wantCode {
				t.Errorf("%s: reply code %d, want %d", c.name, code, c.wantCode)
			}
			if got := digest.SendClassOf(classifySMTP(stage, err)); got != c.wantClass {
				t.Errorf("%s: class %s, want %s", c.name, got, c.wantClass)
			}
		}
		if want := append(append([]string(nil), commands...), c.wantLines...); fmt.Sprint(lines) != fmt.Sprint(want) {
			t.Errorf("%s: the server read %q, want %q", c.name, lines, want)
		}
		if got := wc.writes.Load(); got != c.writes {
			t.Errorf("%s: %d writes, want %d", c.name, got, c.writes)
		}
	}
}

// An address with CR or LF is refused before anything is written: it
// would end its command and start another (go-mail's validateLine).
func TestSendEnvelopeRefusesLineBreaks(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		mail  string
		rcpts []string
		stage gomail.SendErrReason
	}{
		{"MAIL FROM:<a@example.com>\r\nRSET", []string{"<b@example.net>"}, gomail.ErrSMTPMailFrom},
		{"MAIL FROM:<a@example.com>", []string{"<b@example.net>", "<c@example.net>\nRCPT TO:<x@evil.test>"}, gomail.ErrSMTPRcptTo},
		{"MAIL FROM:<a@example.com>", []string{"<b@example.net>\r"}, gomail.ErrSMTPRcptTo},
	} {
		client, server := net.Pipe()
		wc := &writeCounter{Conn: client}
		stage, err := sendEnvelope(textproto.NewConn(wc), c.mail, c.rcpts)
		_ = client.Close()
		_ = server.Close()
		if !errors.Is(err, errLineBreak) || stage != c.stage || wc.writes.Load() != 0 {
			t.Errorf("sendEnvelope(%q, %q) = %v at %v after %d writes; want errLineBreak at %v, nothing written",
				c.mail, c.rcpts, err, stage, wc.writes.Load(), c.stage)
		}
	}
}

// The pipelined commands go through the send's leaseConn like any other
// write: once the send's deadline has passed none of them reaches the
// server, and the failure is temporary (nothing sent).
func TestSendEnvelopeAfterTheLeaseWritesNothing(t *testing.T) {
	t.Parallel()
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	lc := &leaseConn{Conn: client}
	lc.cut.Store(1) // the deadline passed long ago; the runtime's timer not yet fired
	got := make(chan int, 1)
	go func() {
		_ = server.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, _ := server.Read(make([]byte, 256))
		got <- n
	}()
	stage, err := sendEnvelope(textproto.NewConn(lc), "MAIL FROM:<a@example.com>", []string{"<b@example.net>"})
	if stage != gomail.ErrSMTPMailFrom || digest.SendClassOf(classifySMTP(stage, err)) != digest.SendTemporary {
		t.Fatalf("sendEnvelope = %v at %v; want a temporary failure at MAIL", err, stage)
	}
	if n := <-got; n != 0 {
		t.Fatalf("the server read %d bytes written after the deadline", n)
	}
}

// The same for BDAT, whose one write carries the content too: after the
// send's deadline nothing reaches the server, and since the chunk was never
// written the failure is temporary, not ambiguous.
func TestSendChunkedAfterTheLeaseWritesNothing(t *testing.T) {
	t.Parallel()
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	lc := &leaseConn{Conn: client}
	lc.cut.Store(1)
	got := make(chan int, 1)
	go func() {
		_ = server.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, _ := server.Read(make([]byte, 256))
		got <- n
	}()
	_, stage, err := sendChunked(textproto.NewConn(lc), "MAIL FROM:<a@example.com>", []string{"<b@example.net>"}, []byte("Subject: x\r\n\r\nbody\r\n"))
	if err == nil || digest.SendClassOf(classifySMTP(stage, err)) != digest.SendTemporary {
		t.Fatalf("sendChunked = %v at %v; want a temporary failure", err, stage)
	}
	if n := <-got; n != 0 {
		t.Fatalf("the server read %d bytes written after the deadline", n)
	}
}
