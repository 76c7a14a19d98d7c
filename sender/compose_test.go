package sender

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/snapshot"
)

// goMailContent is what go-mail writes for l (Msg.WriteTo of goMail's
// message) for a server with or without 8BITMIME: the reference the
// letter's own bytes must equal.
func goMailContent(t testing.TB, e Envelope, l *Letter, eightBitMIME bool) []byte {
	t.Helper()
	msg := l.msg
	if msg == nil {
		msg = e.goMail(l)
	}
	var buf bytes.Buffer
	if err := writeGoMail(&buf, msg, eightBitMIME); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// composed is l.Compose's bytes.
func composed(t testing.TB, l *Letter, eightBitMIME bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := l.Compose(&buf, eightBitMIME); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// checkLetter composes m both ways, for every server (8BITMIME or not),
// and fails on the first byte that differs.
func checkLetter(t testing.TB, e Envelope, m *digest.Message, now time.Time) {
	t.Helper()
	l, err := e.Letter(m, now)
	if err != nil {
		if digest.SendClassOf(err) != digest.SendPermanent {
			t.Fatalf("letter: %v, want success or a permanent error", err)
		}
		return
	}
	defer l.Release()
	for _, eightBit := range []bool{true, false} {
		want := goMailContent(t, e, l, eightBit)
		got := composed(t, l, eightBit)
		if !bytes.Equal(got, want) {
			i := 0
			for i < min(len(got), len(want)) && got[i] == want[i] {
				i++
			}
			t.Fatalf("8BITMIME %v: the letter differs from go-mail's at byte %d:\n got …%q\nwant …%q\n\nwhole letter:\n%s",
				eightBit, i, got[max(0, i-80):min(len(got), i+80)], want[max(0, i-80):min(len(want), i+80)], got)
		}
	}
}

// exampleMessages renders every unsuppressed customer of
// examples/snapshot.jsonl for 2026-W48 (the golden customers of package
// digest) in locale, or in each its own when locale is "".
func exampleMessages(t testing.TB, locale string) []digest.Message {
	t.Helper()
	src, err := snapshot.OpenFile(filepath.Join("..", "examples", "snapshot.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	week, err := digest.ParseISOWeek("2026-W48")
	if err != nil {
		t.Fatal(err)
	}
	spec := digest.Spec{Week: week, Location: time.UTC, Type: "weekly_activity", Version: "v1"}
	r, err := digest.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	var out []digest.Message
	for rec, err := range src.Records(context.Background(), digest.SourceQuery{Week: week, Location: time.UTC}) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Customer.Suppressed {
			continue
		}
		if locale != "" {
			rec.Customer.Locale = locale
		}
		d, err := digest.Build(rec, spec)
		if err != nil {
			t.Fatal(err)
		}
		rendered, err := r.Render(&d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, digest.Message{Key: testKeyOf(rec.Customer.ID), To: digest.Address{Name: d.Customer.Name, Email: d.Customer.Email},
			Subject: rendered.Subject, Text: rendered.Text, HTML: rendered.HTML, Unsubscribe: "https://example.com/u/" + rec.Customer.ID})
	}
	return out
}

// testKeyOf is a valid digest key that differs by id.
func testKeyOf(id string) digest.Key {
	h := []byte(strings.Repeat("0", 64))
	for i, c := range []byte(id) {
		h[i%64] = "0123456789abcdef"[(int(h[i%64])+int(c))%16]
	}
	return digest.Key("k1:" + string(h))
}

var composeNow = time.Date(2026, 11, 30, 9, 0, 0, 0, time.FixedZone("", 3600))

// The letter of every golden customer, in its own locale and in each
// shipped language, is byte for byte go-mail's.
func TestLetterIsGoMails(t *testing.T) {
	t.Parallel()
	envs := testEnvelopes(t)
	for _, locale := range []string{"", "en-US", "en-GB", "de-DE", "de-CH", "fr-FR", "fr-CA", "es-ES", "es-MX", "ja-JP", "ar-EG", "ar-SA"} {
		msgs := exampleMessages(t, locale)
		if len(msgs) != 21 {
			t.Fatalf("locale %q: %d messages, want the example's 21", locale, len(msgs))
		}
		for i := range msgs {
			m := &msgs[i]
			for j, e := range envs {
				// Test sends, no unsubscribe URL, one that is not https, and
				// one part or the other alone, across the envelopes.
				switch (i + j) % 5 {
				case 1:
					m.Test = true
				case 2:
					m.Unsubscribe = ""
				case 3:
					m.Unsubscribe = "mailto:u@example.com?subject=" + m.To.Email
					m.HTML = ""
				case 4:
					m.Text = ""
				}
				checkLetter(t, e, m, composeNow)
			}
		}
	}
}

// testEnvelopes are senders with and without a display name (ASCII, or
// one that needs encoding, or long enough to fold) and a fixed
// List-Unsubscribe.
func testEnvelopes(t testing.TB) []Envelope {
	t.Helper()
	var envs []Envelope
	for _, c := range []struct{ name, list string }{
		{"", ""},
		{"Account digest", "<mailto:unsubscribe@example.com>"},
		{"Kontoübersicht der Bäckerei-Genossenschaft Süd, Abteilung Kundenkommunikation", ""},
		{"\"Quoted\" (comment) <odd>", "<mailto:u@example.com>, <https://example.com/list>"},
	} {
		e, err := NewEnvelope(digest.Address{Name: c.name, Email: "digest@example.com"}, c.list)
		if err != nil {
			t.Fatal(err)
		}
		envs = append(envs, e)
	}
	return envs
}

// words to make random names, subjects and bodies of: ASCII, Latin
// accents, CJK, Arabic, emoji, spaces of locales, header-like text,
// dots, and characters that need quoting or encoding.
var randomWords = []string{
	"Ada", "Lovelace", "Zoë", "Müller", "François", "Ñandú", "山田", "太郎", "محمد", "علي", "🙂", "😀🎉",
	"Your", "account", "activity,", "Nov", "23\u2009–\u2009Dec", "6,", "2026", "Ihre", "Kontobewegungen", "30.\u00a0Nov.",
	"a\u202fb", "Subject:", "Bcc: x", "=?UTF-8?q?x?=", "\"quoted\"", "(comment)", "<angle>", "a,b", "semi;colon",
	".dot", "..", "-", "--digest-", "=", "=3D", "\t", "x", "", strings.Repeat("long", 30), strings.Repeat("ü", 40),
}

func randomText(rng *rand.Rand, words, maxLine int, sep string) string {
	var b strings.Builder
	line := 0
	for range words {
		w := randomWords[rng.IntN(len(randomWords))]
		if line > 0 && line+len(w) > maxLine {
			b.WriteString("\n")
			line = 0
			if rng.IntN(4) == 0 {
				b.WriteString(".")
			}
		} else if line > 0 {
			b.WriteString(sep)
		}
		b.WriteString(w)
		line += len(w) + 1
	}
	return b.String()
}

// randomMessage is a message of random names, subjects and parts: lines
// short and long (some past SMTP's 998 bytes, so quoted-printable),
// non-ASCII, dots at the start of lines, test sends, with and without
// unsubscribe URLs.
func randomMessage(rng *rand.Rand) *digest.Message {
	m := &digest.Message{
		Key:     testKeyOf(randomText(rng, 3, 100, "")),
		To:      digest.Address{Name: randomText(rng, rng.IntN(6), 1000, " "), Email: []string{"ada@example.net", "zoe.mueller@bücher.example", "o'brien@example.ie", "a.b+c@sub.example.co.uk"}[rng.IntN(4)]},
		Subject: randomText(rng, rng.IntN(20), 1000, " "),
		Test:    rng.IntN(3) == 0,
	}
	lineLen := []int{60, 200, 990, 1200}[rng.IntN(4)]
	switch rng.IntN(4) {
	case 0:
		m.Text = randomText(rng, 1+rng.IntN(300), lineLen, " ")
	case 1:
		m.HTML = "<p>" + randomText(rng, 1+rng.IntN(300), lineLen, " ") + "</p>\n"
	default:
		m.Text = randomText(rng, 1+rng.IntN(300), lineLen, " ") + "\n"
		m.HTML = "<html><body>\n" + randomText(rng, 1+rng.IntN(300), lineLen, " ") + "\n</body></html>"
	}
	switch rng.IntN(3) {
	case 0:
		m.Unsubscribe = "https://example.com/u/" + randomText(rng, 1, 100, "")
	case 1:
		m.Unsubscribe = "mailto:u@example.com"
	}
	return m
}

// Random letters too: random names, subjects, non-ASCII, long lines, test
// sends, with and without unsubscribe URLs, every envelope.
func TestRandomLetterIsGoMails(t *testing.T) {
	t.Parallel()
	envs := testEnvelopes(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 400 {
		m := randomMessage(rng)
		now := composeNow.Add(time.Duration(rng.Int64N(1e15)))
		checkLetter(t, envs[i%len(envs)], m, now)
	}
}

// A message whose part holds the key's boundary goes to go-mail whole,
// with a random boundary, rather than with a broken structure.
func TestLetterWithTheBoundaryInAPartIsGoMails(t *testing.T) {
	t.Parallel()
	env := testEnvelopes(t)[1]
	key := testKeyOf("boundary")
	m := &digest.Message{Key: key, To: digest.Address{Email: "ada@example.net"}, Subject: "s",
		Text: "before\n--" + boundary(key) + "\nafter\n", HTML: "<p>x</p>"}
	l, err := env.Letter(m, composeNow)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if l.msg == nil || l.boundary != "" {
		t.Fatalf("boundary %q, go-mail message %v: want go-mail to compose it", l.boundary, l.msg != nil)
	}
	d := composed(t, l, true)
	if b := l.msg.GetBoundary(); strings.Contains(string(d), "boundary="+boundary(key)) || !strings.Contains(string(d), "after") {
		t.Errorf("composed with the key's boundary (go-mail's %q):\n%s", b, d)
	}
}

// FuzzLetterIsGoMails: any message the envelope accepts is composed
// byte for byte as go-mail composes it.
func FuzzLetterIsGoMails(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		m := randomMessage(rng)
		f.Add(m.To.Name, m.Subject, m.Text, m.HTML, m.Unsubscribe, m.Test, "Account digest")
	}
	f.Add("Zoë", "Ihre Kontobewegungen, 30. Nov.\u2009–\u20096. Dez. 2026", "a\n.b\n", "", "", false, "")
	f.Fuzz(func(t *testing.T, name, subject, text, html, unsubscribe string, test bool, fromName string) {
		e, err := NewEnvelope(digest.Address{Name: fromName, Email: "digest@example.com"}, "<mailto:u@example.com>")
		if err != nil {
			return
		}
		m := &digest.Message{Key: testKeyOf("fuzz"), To: digest.Address{Name: name, Email: "ada@example.net"},
			Subject: subject, Text: text, HTML: html, Unsubscribe: unsubscribe, Test: test}
		checkLetter(t, e, m, composeNow)
	})
}

// A header more (a provider's, say) is one setHeader, composed as go-mail
// composes it: folded around its 76th column, encoded where not ASCII.
func TestAddedHeaderIsGoMails(t *testing.T) {
	t.Parallel()
	envs := testEnvelopes(t)
	msgs := exampleMessages(t, "")
	// Cases around the fold: a first word too long for the line, runs of
	// spaces, a value that ends in a space, one word per line, JSON.
	for i, v := range []string{"", " ", "a", "a  b", "x ", strings.Repeat("w", 80), strings.Repeat("w", 80) + " y",
		strings.Repeat("ab ", 40), strings.Repeat("abcdefghij ", 15) + "  end", "=?UTF-8?q?Gr=C3=BC=C3=9Fe?= =?UTF-8?q?x?=",
		`{"unique_args": {"digest_key": "k1:` + strings.Repeat("a", 64) + `"}}`, "Grüße aus Köln " + strings.Repeat("ß", 30)} {
		for _, name := range []string{"X-SMTPAPI", "X-Mailgun-Variables", "A-First", "Subject"} {
			e := envs[i%len(envs)]
			m := msgs[i%len(msgs)]
			l, err := e.Letter(&m, composeNow)
			if err != nil {
				t.Fatal(err)
			}
			l.setHeader(name, v)
			for _, eightBit := range []bool{true, false} {
				want := goMailContent(t, e, l, eightBit)
				if got := composed(t, l, eightBit); !bytes.Equal(got, want) {
					t.Errorf("%s: %q: got\n%s\nwant\n%s", name, v, got, want)
				}
			}
			l.Release()
		}
	}
}

// The provider headers' JSON is encoding/json's for the one-entry maps it
// stands for, whatever the key holds: the usual key's characters, and
// those JSON escapes (quotes, HTML-safe <, > and &, control characters,
// U+2028, invalid UTF-8).
func TestProviderKeyHeadersAreJSONMarshals(t *testing.T) {
	t.Parallel()
	hex := strings.Repeat("0123456789abcdef", 4)
	for _, kid := range []string{"k1", "K_2026-a", "Kid.2026", `k"1`, `k\1`, "k<1", "k>1", "k&1", "k\x001\t", "kü", "k\u20281", "k\xff1", "k\x7f1"} {
		key := digest.Key(kid + ":" + hex)
		arg, err := json.Marshal(map[string]string{"digest_key": string(key)})
		if err != nil {
			t.Fatal(err)
		}
		api, err := json.Marshal(map[string]json.RawMessage{"unique_args": arg})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		providerKeyHeaders(key, func(name, value string) { got[name] = value })
		if got[HeaderSendGridAPI] != string(api) || got[HeaderMailgunVariables] != string(arg) {
			t.Errorf("key id %q: %s %s, %s %s; want %s, %s", kid, HeaderSendGridAPI, got[HeaderSendGridAPI],
				HeaderMailgunVariables, got[HeaderMailgunVariables], api, arg)
		}
	}
}
