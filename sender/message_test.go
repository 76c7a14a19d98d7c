package sender_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender"
)

var addressCases = []struct {
	in string
	ok bool
}{
	{"ada@example.net", true},
	{"first.last+tag@sub.example.co.uk", true},
	{"o'brien@example.ie", true},
	{"user@localhost", true},
	{"", false},
	{"plain", false},
	{"@example.com", false},
	{"ada@", false},
	{"ada@@example.com", false},
	{"ada @example.com", false},
	{"ada@example.com ", false},
	{"Ada <ada@example.com>", false},
	{"<ada@example.com>", false},
	{"ada@example.com\r\nBcc: evil@attacker.test", false},
	{"ada@example.com\nX: y", false},
	{"ada@[127.0.0.1]", false},
	{"ada@example.com (comment)", false},
	{"a,b@example.com", false},
	{strings.Repeat("a", 250) + "@example.com", false},
}

func TestValidateAddress(t *testing.T) {
	t.Parallel()
	for _, c := range addressCases {
		err := sender.ValidateAddress(c.in)
		if (err == nil) != c.ok {
			t.Errorf("ValidateAddress(%q) = %v, want ok=%v", c.in, err, c.ok)
		}
		if err != nil && !errors.Is(err, sender.ErrInvalidAddress) {
			t.Errorf("ValidateAddress(%q) = %v, want ErrInvalidAddress", c.in, err)
		}
	}
}

// FuzzValidateAddress checks that an accepted address can go into an SMTP
// command and a header as is, and that the outbox turns any recipient into
// either a message with exactly one To address or a permanent error, never
// a panic.
func FuzzValidateAddress(f *testing.F) {
	for _, c := range addressCases {
		f.Add(c.in, "Ada")
	}
	dir := f.TempDir()
	o, err := sender.NewOutbox(sender.OutboxConfig{Dir: dir, From: digest.Address{Email: "d@example.com"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, addr, name string) {
		err := sender.ValidateAddress(addr)
		if err == nil && strings.ContainsAny(addr, "\r\n\x00 <>,") {
			t.Fatalf("accepted %q", addr)
		}
		msg := testMessage(testKey("fz", 'a'))
		msg.To = digest.Address{Name: name, Email: addr}
		if _, sendErr := o.Send(t.Context(), msg); sendErr != nil && digest.ClassOf(sendErr) != digest.ClassPermanent {
			t.Fatalf("Send to %q: %v, want success or permanent", addr, sendErr)
		}
	})
}

func TestMailpitTagFitsMailpitRules(t *testing.T) {
	t.Parallel()
	key := digest.Key("Key-ID.with_32_characters_xxxxxx:" + strings.Repeat("f", 64))
	tag := sender.MailpitTag(key)
	if len(tag) > 100 {
		t.Fatalf("tag %q is %d characters, Mailpit keeps 100", tag, len(tag))
	}
	for _, r := range tag {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.@", r)) {
			t.Fatalf("tag %q has %q, which Mailpit would replace", tag, r)
		}
	}
}

func TestNewSMTPMailerValidatesConfig(t *testing.T) {
	t.Parallel()
	good, err := sender.ParseSMTPURL("smtp://127.0.0.1:25?tls=none")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cfg  sender.MailerConfig
	}{
		{"no host", sender.MailerConfig{From: digest.Address{Email: "d@example.com"}}},
		{"bad from", sender.MailerConfig{SMTP: good, From: digest.Address{Email: "not an address"}}},
		{"CRLF in List-Unsubscribe", sender.MailerConfig{SMTP: good, From: digest.Address{Email: "d@example.com"}, ListUnsubscribe: "<mailto:u@example.com>\r\nBcc: x@evil.test"}},
		{"negative concurrency", sender.MailerConfig{SMTP: good, From: digest.Address{Email: "d@example.com"}, Concurrency: -1}},
	}
	for _, c := range cases {
		if m, err := sender.NewSMTPMailer(c.cfg); err == nil {
			_ = m.Close()
			t.Errorf("%s: NewSMTPMailer accepted %+v", c.name, c.cfg)
		}
	}
}
