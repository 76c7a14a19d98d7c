package smtp_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/smtp"
)

// The mailer writes after DATA exactly the bytes that go-mail's writer
// wrote for the same message and server (Msg.WriteTo through textproto's
// dotWriter): the same headers, parts, encodings, dot-stuffing and final
// dot, with and without 8BITMIME.
func TestSendWritesWhatGoMailsDataWriterWrote(t *testing.T) {
	t.Parallel()
	from := digest.Address{Name: "Weekly Digest", Email: "digest@example.com"}
	long := strings.Repeat("x", 1200) // no 8bit part: quoted-printable
	msgs := map[string]*digest.Message{
		"plain": testMessage(testKey("k1", 'a')),
		"dots": {Key: testKey("k1", 'b'), To: digest.Address{Name: "Ada", Email: "ada@example.net"}, Subject: ".dot",
			Text: ".\n..two\n.\n\nend.\n.", HTML: ".<p>x</p>\n.\n"},
		"non-ascii": {Key: testKey("k1", 'c'), To: digest.Address{Name: "Zoë Ünal", Email: "zoe@example.net"}, Subject: "Ihre Woche: 3 Zahlungen, 12,50 €",
			Text: "Grüße,\n.€ 12,50\n", HTML: "<p>Grüße</p>\n.<p>€</p>"},
		"quoted-printable": {Key: testKey("k1", 'd'), To: digest.Address{Email: "qp@example.net"}, Subject: "long",
			Text: ".start\n" + long + "\n.\n", HTML: long + ".\n.x"},
		"html-only": {Key: testKey("k1", 'e'), To: digest.Address{Email: "h@example.net"}, Subject: "h", HTML: "<p>only</p>\n.\n"},
		"text-only, test send, unsubscribe": {Key: testKey("k1", 'f'), To: digest.Address{Email: "t@example.net"}, Subject: "t",
			Text: "no newline at the end", Test: true, Unsubscribe: "https://example.com/u?t=1"},
	}
	for _, eightBit := range []bool{true, false} {
		srv := startSMTP(t, fault{})
		srv.no8bit.Store(!eightBit)
		m := newMailer(t, srv.addr, func(c *smtp.Config) {
			c.Now = func() time.Time { return sendTime }
			c.ListUnsubscribe = "<mailto:u@example.com>"
		})
		for name, msg := range msgs {
			if _, err := m.Send(ctxT(t), msg); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			raw := srv.rawData()
			got := raw[len(raw)-1]
			want, err := smtp.DotWriterData(from, "<mailto:u@example.com>", msg, sendTime, eightBit)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("8BITMIME %v, %s: the server read\n%q\nwant\n%q", eightBit, name, got, want)
			}
		}
	}
}
