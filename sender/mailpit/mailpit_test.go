package mailpit_test

import (
	"bytes"
	"net/smtp"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/mailpittest"
	"github.com/weeklydigest/digest/sender"
	"github.com/weeklydigest/digest/sender/mailpit"
)

// testKey returns a valid key whose hex part repeats c.
func testKey(kid string, c byte) digest.Key {
	return digest.Key(kid + ":" + strings.Repeat(string(c), 64))
}

// The look-up finds a message exactly as sent (sender.WriteMessage, the
// bytes of the SMTP adapter and the outbox) by its key, a key id in mixed
// case included, and no other key of the same key id.
func TestLookupFindsTheMessageAsSent(t *testing.T) {
	t.Parallel()
	mp := mailpittest.Start(t)
	ctx := t.Context()
	l := mailpit.New(mailpit.Config{Base: mp.APIURL()})
	key := testKey("Kid.2026_a", '7')
	if _, found, err := l.Lookup(ctx, key); err != nil || found {
		t.Fatalf("Lookup before send = %v, %v; want not found", found, err)
	}
	m := &digest.Message{Key: key, To: digest.Address{Name: "Zoë Müller", Email: "zoe@example.com"},
		Subject: "Ihre Woche: 3 Zahlungen ✓", Text: "Hello\n", HTML: "<p>Hello</p>\n"}
	var buf bytes.Buffer
	if err := sender.WriteMessage(&buf, m, digest.Address{Email: "digest@mail.example.com"}, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := smtp.SendMail(mp.SMTPAddr(), nil, "digest@mail.example.com", []string{m.To.Email}, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	ref, found, err := l.Lookup(ctx, key)
	if err != nil || !found || ref == "" {
		t.Fatalf("Lookup after send = %q, %v, %v; want found", ref, found, err)
	}
	if _, found, err := l.Lookup(ctx, testKey("Kid.2026_a", '8')); err != nil || found {
		t.Fatalf("Lookup of another key = %v, %v; want not found", found, err)
	}
}

// CheckReachable passes against Mailpit, delivering nothing, and fails
// against a closed port.
func TestCheckReachable(t *testing.T) {
	t.Parallel()
	mp := mailpittest.Start(t)
	ctx := t.Context()
	if err := sender.CheckReachable(ctx, mailpit.New(mailpit.Config{Base: mp.APIURL()})); err != nil {
		t.Fatalf("CheckReachable: %v", err)
	}
	if n, err := mp.Count(ctx); err != nil || n != 0 {
		t.Fatalf("Mailpit holds %d messages (%v), want none", n, err)
	}
	if err := sender.CheckReachable(ctx, mailpit.New(mailpit.Config{Base: "http://127.0.0.1:1"})); err == nil {
		t.Fatal("CheckReachable against a closed port passed")
	}
}
