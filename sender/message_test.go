package sender_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode"

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
// command and a header as is, and that rendering (what the Mailer and the
// outbox send) turns any recipient into either a message or a permanent
// error, never a panic.
func FuzzValidateAddress(f *testing.F) {
	for _, c := range addressCases {
		f.Add(c.in, "Ada")
	}
	env, err := sender.NewEnvelope(digest.Address{Email: "d@example.com"}, "")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, addr, name string) {
		err := sender.ValidateAddress(addr)
		if err == nil && strings.ContainsAny(addr, "\r\n\x00 <>,") {
			t.Fatalf("accepted %q", addr)
		}
		msg := &digest.Message{Key: digest.Key("fz:" + strings.Repeat("a", 64)), To: digest.Address{Name: name, Email: addr},
			Subject: "Your week", Text: "Hello,\n", HTML: "<p>Hello,</p>"}
		if _, renderErr := env.Render(msg, time.Unix(0, 0)); renderErr != nil && digest.SendClassOf(renderErr) != digest.SendPermanent {
			t.Fatalf("Render to %q: %v, want success or permanent", addr, renderErr)
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

// HeaderText keeps a subject on one line and its words apart by one space,
// and keeps the spaces CLDR writes in dates (U+2009, U+00A0, U+202F).
func TestHeaderTextKeepsLocaleSpaces(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Your account activity, Nov 23\u2009–\u2009Dec 6, 2026":   "Your account activity, Nov 23\u2009–\u2009Dec 6, 2026",
		"Ihre Kontobewegungen, 30. Nov.\u2009–\u20096. Dez. 2026": "Ihre Kontobewegungen, 30. Nov.\u2009–\u20096. Dez. 2026",
		"a\u00a0b\u202fc":                   "a\u00a0b\u202fc",
		"  line\r\nbreak\tand  spaces \n":   "line break and spaces",
		"Bcc: x\r\nSubject: injected\u2028": "Bcc: x Subject: injected",
	} {
		if got := sender.HeaderText(in); got != want {
			t.Errorf("HeaderText(%+q) = %+q, want %+q", in, got, want)
		}
	}
}

// HeaderText's output is one clean header line whatever the input, so its
// fast path (the input as it is) never lets through what the full
// transformation would change.
func FuzzHeaderText(f *testing.F) {
	for _, s := range []string{"", " ", "a  b", "a\u2028b", "Zoë Müller", "x\u0085y", " lead", "trail ", "tab\there"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := sender.HeaderText(s)
		if again := sender.HeaderText(got); again != got {
			t.Fatalf("HeaderText(%q) = %q, and again %q: want a fixed point", s, got, again)
		}
		if strings.ContainsFunc(got, func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }) || strings.Contains(got, "  ") ||
			strings.HasPrefix(got, " ") || strings.HasSuffix(got, " ") {
			t.Fatalf("HeaderText(%q) = %q", s, got)
		}
	})
}
