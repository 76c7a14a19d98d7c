package smtp_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/mailpittest"
	"github.com/weeklydigest/digest/sender"
	"github.com/weeklydigest/digest/sender/smtp"
)

// sendOne sends msg through a mailer dated now and returns what the server
// stored.
func sendOne(t *testing.T, srv *testServer, msg *digest.Message, now time.Time) []byte {
	t.Helper()
	m := newMailer(t, srv.addr, func(c *smtp.Config) { c.Now = func() time.Time { return now } })
	if _, err := m.Send(ctxT(t), msg); err != nil {
		t.Fatal(err)
	}
	got := srv.messages()
	return got[len(got)-1].data
}

// partEncodings returns the Content-Transfer-Encoding of each part, and
// fails t on any line longer than SMTP's 998 bytes.
func partEncodings(t *testing.T, raw []byte) []string {
	t.Helper()
	for line := range bytes.SplitSeq(raw, []byte("\r\n")) {
		if len(line) > 998 {
			t.Fatalf("a line of %d bytes", len(line))
		}
	}
	return headerValues(string(raw), "Content-Transfer-Encoding: ")
}

func headerValues(s, prefix string) []string {
	var out []string
	for line := range strings.SplitSeq(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			out = append(out, v)
		}
	}
	return out
}

// checkParts fails t unless raw's parts decode to msg's text and HTML.
func checkParts(t *testing.T, raw []byte, msg *digest.Message) {
	t.Helper()
	p, err := mailpittest.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.ReplaceAll(p.Text, "\r\n", "\n"); got != msg.Text {
		t.Errorf("text part %q, want %q", got, msg.Text)
	}
	if got := strings.ReplaceAll(p.HTML, "\r\n", "\n"); got != msg.HTML {
		t.Errorf("HTML part %q, want %q", got, msg.HTML)
	}
}

var sendTime = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// To a server that advertises 8BITMIME the parts go 8bit, as rendered,
// non-ASCII included; and every attempt of the same digest sends the same
// bytes (the boundary derives from the key), which are also what the
// file outbox writes.
func TestSendParts8BitAndTheSameOnEveryAttempt(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, fault{})
	msg := testMessage(testKey("k1", 'a'))
	msg.Text += "Net: −4,50 € — ünïcödé\n"
	first := sendOne(t, srv, msg, sendTime)
	if got := partEncodings(t, first); strings.Join(got, ",") != "8bit,8bit" {
		t.Fatalf("part encodings %v, want 8bit for both", got)
	}
	checkParts(t, first, msg)
	if again := sendOne(t, srv, msg, sendTime); !bytes.Equal(first, again) {
		t.Fatalf("a second attempt sent other bytes:\n%s\n---\n%s", first, again)
	}
	env, err := sender.NewEnvelope(digest.Address{Name: "Weekly Digest", Email: "digest@example.com"}, "")
	if err != nil {
		t.Fatal(err)
	}
	written, err := env.Render(msg, sendTime)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(written, first) {
		t.Fatalf("the outbox writes other bytes than the mailer sends:\n%s\n---\n%s", written, first)
	}
}

// To a server without 8BITMIME, and for a part with a line longer than 998
// bytes, the parts go quoted-printable, every line within 998 bytes.
func TestSendPartsQuotedPrintableWhen8BitCannotGo(t *testing.T) {
	t.Parallel()
	long := testMessage(testKey("k1", 'c'))
	long.HTML = "<p>" + strings.Repeat("long description ", 100) + "</p>\n"
	nonASCII := testMessage(testKey("k1", 'b'))
	nonASCII.Text += "Net: −4,50 €\n"
	for _, c := range []struct {
		name   string
		no8bit bool
		msg    *digest.Message
	}{{"server without 8BITMIME", true, nonASCII}, {"line over 998 bytes", false, long}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := startSMTP(t, fault{})
			srv.no8bit.Store(c.no8bit)
			raw := sendOne(t, srv, c.msg, sendTime)
			if got := partEncodings(t, raw); strings.Join(got, ",") != "quoted-printable,quoted-printable" {
				t.Fatalf("part encodings %v, want quoted-printable for both", got)
			}
			checkParts(t, raw, c.msg)
		})
	}
}
