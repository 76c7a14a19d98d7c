package smtp_test

import (
	"bytes"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender"
	"github.com/weeklydigest/digest/sender/smtp"
)

// WriteMessage writes the message the mailer sends: the same headers
// (see also TestSendParts8BitAndTheSameOnEveryAttempt: the same bytes).
func TestWriteMessageIsWhatTheMailerSends(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 5, 7, 0, 0, 0, time.UTC)
	from := digest.Address{Name: "Weekly Digest", Email: "digest@example.com"}
	srv := startSMTP(t, fault{})
	m := newMailer(t, srv.addr, func(c *smtp.Config) {
		c.Now = func() time.Time { return now }
		c.ListUnsubscribe = "<mailto:u@example.com>"
	})
	msg := testMessage(testKey("k1", 'd'))
	if _, err := m.Send(ctxT(t), msg); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := sender.WriteMessage(&buf, msg, from, "<mailto:u@example.com>", now); err != nil {
		t.Fatal(err)
	}
	sent, err := mail.ReadMessage(bytes.NewReader(srv.messages()[0].data))
	if err != nil {
		t.Fatal(err)
	}
	written, err := mail.ReadMessage(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(sent.Header) != len(written.Header) {
		t.Errorf("headers: sent %d, written %d", len(sent.Header), len(written.Header))
	}
	for h := range sent.Header {
		if h == "Content-Type" {
			continue
		}
		if got, want := written.Header.Get(h), sent.Header.Get(h); got != want {
			t.Errorf("%s: written %q, sent %q", h, got, want)
		}
	}
}

// A test send says so in the subject and a header, and carries a key no
// real digest has.
func TestSendMarksTestSends(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, fault{})
	m := newMailer(t, srv.addr, nil)
	msg := testMessage(digest.TestKey())
	msg.Test = true
	if _, err := m.Send(ctxT(t), msg); err != nil {
		t.Fatal(err)
	}
	got, err := mail.ReadMessage(bytes.NewReader(srv.messages()[0].data))
	if err != nil {
		t.Fatal(err)
	}
	if got.Header.Get(sender.HeaderTest) != "1" || !strings.HasPrefix(got.Header.Get("Subject"), "[TEST] ") {
		t.Fatalf("X-Digest-Test %q, Subject %q; want 1 and a [TEST] prefix", got.Header.Get(sender.HeaderTest), got.Header.Get("Subject"))
	}
	if k := digest.Key(got.Header.Get(sender.HeaderKey)); k.KeyID() != digest.TestKeyID || k == digest.TestKey() {
		t.Fatalf("key %s: want a fresh test key", k)
	}
}
