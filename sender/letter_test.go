package sender

import (
	"strings"
	"testing"

	gomail "github.com/wneessen/go-mail"

	"github.com/weeklydigest/digest/digest"
)

func TestFits8bit(t *testing.T) {
	t.Parallel()
	line := func(n int) string { return strings.Repeat("é", n/2) + strings.Repeat("x", n%2) }
	for _, c := range []struct {
		s    string
		want bool
	}{
		{"", true},
		{"a\nb\n", true},
		{"\n\n\n", true},
		{line(998), true},
		{line(999), false},
		{line(998) + "\n", true},
		{line(999) + "\n", false},
		{"a\n" + line(998) + "\n" + line(998), true},
		{"a\n" + line(998) + "\n" + line(999), false},
		{"a\n" + line(999) + "\n" + line(998), false},
		{line(500) + "\n" + line(998) + "\n" + line(997) + "\n", true},
		{strings.Repeat(line(998)+"\n", 5), true},
		{"a\x00b", false},
		{"a\r\nb", false},
		{"a\rb", false},
	} {
		if got := fits8bit(c.s); got != c.want {
			t.Errorf("fits8bit(%d bytes, %q...) = %v, want %v", len(c.s), c.s[:min(len(c.s), 12)], got, c.want)
		}
	}
}

// writeGoMail leaves the message as built: after a compose for a server
// without 8BITMIME (quoted-printable parts), the same message composed for
// one with it (a new connection after a stale one) has its 8bit parts.
func TestWriteGoMailLeavesTheMessageAsBuilt(t *testing.T) {
	t.Parallel()
	env, err := NewEnvelope(digest.Address{Email: "digest@example.com"}, "")
	if err != nil {
		t.Fatal(err)
	}
	dm := &digest.Message{Key: digest.Key("k1:" + strings.Repeat("a", 64)), To: digest.Address{Email: "ada@example.net"},
		Subject: "s", Text: "Grüße\n", HTML: "<p>€</p>\n"}
	compose := func(msg *gomail.Msg, eightBit bool) string {
		var buf strings.Builder
		if err := writeGoMail(&buf, msg, eightBit); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	msg, err := env.build(dm, composeNow)
	if err != nil {
		t.Fatal(err)
	}
	if got := compose(msg, false); strings.Count(got, "Content-Transfer-Encoding: quoted-printable") != 2 {
		t.Fatalf("without 8BITMIME:\n%s", got)
	}
	fresh, err := env.build(dm, composeNow)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := compose(msg, true), compose(fresh, true); got != want || !strings.Contains(got, "Content-Transfer-Encoding: 8bit") {
		t.Fatalf("with 8BITMIME after without:\n%s\nwant\n%s", got, want)
	}
}
