package smtp_test

import (
	"bytes"
	"context"
	"mime"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/mailpittest"
	"github.com/weeklydigest/digest/sender"
	"github.com/weeklydigest/digest/sender/smtp"
	"github.com/weeklydigest/digest/unsubscribe"
)

func newMailpitMailer(t *testing.T, mp *mailpittest.Server, url string) *smtp.Mailer {
	t.Helper()
	cfg, err := smtp.ParseSMTPURL(strings.ReplaceAll(url, "ADDR", mp.SMTPAddr()))
	if err != nil {
		t.Fatal(err)
	}
	m, err := smtp.NewMailer(smtp.Config{
		SMTP:            cfg,
		From:            digest.Address{Name: "Wöchentlicher Digest", Email: "digest@mail.example.com"},
		ListUnsubscribe: "<mailto:unsubscribe@mail.example.com>",
		Timeout:         5 * time.Second,
		HELO:            "localhost",
		Now:             func() time.Time { return time.Date(2026, 8, 10, 7, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// byTag finds the message Mailpit holds for key by its tag (X-Tags:
// sender.MailpitTag), as the Mailpit look-up searches for it.
func byTag(ctx context.Context, t *testing.T, mp *mailpittest.Server, key digest.Key) (string, bool) {
	t.Helper()
	ids, err := mp.Search(ctx, "tag:"+sender.MailpitTag(key))
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) > 1 {
		t.Fatalf("%d messages tagged for %s, want at most one", len(ids), key)
	}
	if len(ids) == 0 {
		return "", false
	}
	return ids[0], true
}

func TestMailpitSendThenFindByTag(t *testing.T) {
	t.Parallel()
	mp := mailpittest.Start(t)
	ctx := ctxT(t)
	// Authenticate to check the password reaches the server; Mailpit
	// accepts any, and go-mail allows PLAIN without TLS to 127.0.0.1 only.
	m := newMailpitMailer(t, mp, "smtp://user:s3cret@ADDR?tls=none&auth=plain")

	key := testKey("Kid.2026_a", '7')
	msg := testMessage(key)
	msg.To.Name = "Zoë Müller"
	msg.Subject = "Ihre Woche: 3 Zahlungen ✓"
	msg.HTML = `<p>Hello &lt;script&gt;alert(1)&lt;/script&gt; &amp; more</p>`
	if _, found := byTag(ctx, t, mp, key); found {
		t.Fatal("a message tagged for the key before the send")
	}
	if _, err := m.Send(ctx, msg); err != nil {
		t.Fatalf("Send: %v", err)
	}
	ref, found := byTag(ctx, t, mp, key)
	if !found {
		t.Fatal("no message tagged for the key after the send")
	}
	// Another key of the same kid must not match.
	if _, found := byTag(ctx, t, mp, testKey("Kid.2026_a", '8')); found {
		t.Fatal("a message tagged for another key")
	}

	raw, err := mp.Raw(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("received message does not parse: %v", err)
	}
	h := parsed.Header
	dec := new(mime.WordDecoder)
	subject, _ := dec.DecodeHeader(h.Get("Subject"))
	to, _ := h.AddressList("To")
	from, _ := h.AddressList("From")
	for _, c := range []struct{ name, got, want string }{
		{"Subject", subject, msg.Subject},
		{"Message-ID", h.Get("Message-ID"), "<" + key.Hex() + "@mail.example.com>"},
		{sender.HeaderKey, h.Get(sender.HeaderKey), string(key)},
		{sender.HeaderPostmarkKey, h.Get(sender.HeaderPostmarkKey), string(key)},
		{"List-Unsubscribe", h.Get("List-Unsubscribe"), "<mailto:unsubscribe@mail.example.com>"},
		{"Date", h.Get("Date"), "Mon, 10 Aug 2026 07:00:00 +0000"},
		{"To", fmtAddrs(to), "Zoë Müller <ada@example.net>"},
		{"From", fmtAddrs(from), "Wöchentlicher Digest <digest@mail.example.com>"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	text, html := alternativeParts(t, raw)
	if !strings.Contains(text, "3 payments this week.") {
		t.Errorf("text part = %q", text)
	}
	if !strings.Contains(html, msg.HTML) {
		t.Errorf("html part = %q, want it to contain the escaped HTML %q", html, msg.HTML)
	}
}

func fmtAddrs(as []*mail.Address) string {
	var s []string
	for _, a := range as {
		s = append(s, a.Name+" <"+a.Address+">")
	}
	return strings.Join(s, ", ")
}

// alternativeParts checks the body is multipart/alternative with exactly a
// text/plain part then a text/html part, and returns both decoded.
func alternativeParts(t *testing.T, raw []byte) (text, html string) {
	t.Helper()
	p, err := mailpittest.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Types, ",") != "text/plain,text/html" {
		t.Fatalf("parts = %v, want text/plain then text/html", p.Types)
	}
	return p.Text, p.HTML
}

func TestMailpitHeaderInjection(t *testing.T) {
	t.Parallel()
	mp := mailpittest.Start(t)
	ctx := ctxT(t)
	m := newMailpitMailer(t, mp, "smtp://ADDR?tls=none")
	cases := []struct {
		name string
		edit func(*digest.Message)
	}{
		{"CRLF in subject", func(m *digest.Message) { m.Subject = "Hi\r\nX-Injected: subject\r\nBcc: evil@attacker.test" }},
		{"LF in subject", func(m *digest.Message) { m.Subject = "Hi\nX-Injected: subject" }},
		{"CRLF in name", func(m *digest.Message) { m.To.Name = "Ada\r\nX-Injected: name\r\nBcc: evil@attacker.test" }},
		{"CR in name", func(m *digest.Message) { m.To.Name = "Ada\rX-Injected: name" }},
		{"quote and CRLF in name", func(m *digest.Message) { m.To.Name = "Ada\" <x@y>\r\nX-Injected: q" }},
	}
	for i, c := range cases {
		msg := testMessage(testKey("inj", "0123456789"[i]))
		c.edit(msg)
		if _, err := m.Send(ctx, msg); err != nil {
			t.Fatalf("%s: Send: %v", c.name, err)
		}
	}
	msgs, err := mp.Messages(ctx)
	if err != nil || len(msgs) != len(cases) {
		t.Fatalf("Mailpit has %d messages (%v), want %d", len(msgs), err, len(cases))
	}
	for _, s := range msgs {
		raw, err := mp.Raw(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := mail.ReadMessage(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("message %s does not parse: %v", s.ID, err)
		}
		if v := parsed.Header.Get("X-Injected"); v != "" {
			t.Errorf("message %q: injected header X-Injected: %q", s.Subject, v)
		}
		if v := parsed.Header.Get("Bcc"); v != "" {
			t.Errorf("message %q: injected Bcc: %q", s.Subject, v)
		}
		to, err := parsed.Header.AddressList("To")
		if err != nil || len(to) != 1 || to[0].Address != "ada@example.net" {
			t.Errorf("message %q: To = %v (%v), want only ada@example.net", s.Subject, to, err)
		}
	}
}

// A per-recipient https unsubscribe URI gives RFC 8058 headers, beside the
// fixed mailto: of DIGEST_LIST_UNSUBSCRIBE; a URI that could end the header
// is a permanent failure, never a header of its own.
func TestMailpitOneClickUnsubscribeHeaders(t *testing.T) {
	t.Parallel()
	mp := mailpittest.Start(t)
	ctx := ctxT(t)
	m := newMailpitMailer(t, mp, "smtp://ADDR?tls=none")
	received := func(msg *digest.Message) mail.Header {
		t.Helper()
		if _, err := m.Send(ctx, msg); err != nil {
			t.Fatal(err)
		}
		id, found := byTag(ctx, t, mp, msg.Key)
		if !found {
			t.Fatal("no message tagged for the key")
		}
		raw, err := mp.Raw(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := mail.ReadMessage(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		return parsed.Header
	}
	msg := testMessage(testKey("k1", '3'))
	msg.Unsubscribe = "https://example.com/u/k1~abc_DEF-123"
	h := received(msg)
	got, err := unsubscribe.CheckOneClick(h)
	if err != nil || got != msg.Unsubscribe {
		t.Fatalf("CheckOneClick = %q, %v; want %q", got, err, msg.Unsubscribe)
	}
	if lu := h.Get("List-Unsubscribe"); lu != "<https://example.com/u/k1~abc_DEF-123>, <mailto:unsubscribe@mail.example.com>" {
		t.Errorf("List-Unsubscribe = %q", lu)
	}
	for _, bad := range []string{"https://example.com/u/x\r\nBcc: victim@example.com", "https://example.com/u/x>, <https://evil.test/", "https://example.com/u/x y"} {
		msg := testMessage(testKey("k1", '4'))
		msg.Unsubscribe = bad
		if _, err := m.Send(ctx, msg); digest.SendClassOf(err) != digest.SendPermanent {
			t.Errorf("Send with unsubscribe %q = %v, want a permanent failure", bad, err)
		}
	}
	if n, err := mp.Count(ctx); err != nil || n != 1 {
		t.Errorf("Mailpit holds %d messages (%v), want 1", n, err)
	}
	// A mailto: template gives no List-Unsubscribe-Post (RFC 8058 needs https).
	msg = testMessage(testKey("k1", '5'))
	msg.Unsubscribe = "mailto:u@example.com?subject=k1~abc"
	h = received(msg)
	if _, err := unsubscribe.CheckOneClick(h); err == nil || h.Get("List-Unsubscribe-Post") != "" {
		t.Errorf("mailto-only message passes as one-click: %v", h)
	}
}
