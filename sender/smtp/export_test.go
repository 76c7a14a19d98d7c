package smtp

import (
	"bufio"
	"bytes"
	"net/textproto"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender"
)

// DotWriterData returns what the mailer wrote after DATA, final dot
// included, before it composed messages itself: go-mail's Msg.WriteTo
// through net/textproto's dotWriter (go-mail's DataCloser), for a server
// that does or does not advertise 8BITMIME. The wire tests pin the
// mailer's bytes to it.
func DotWriterData(from digest.Address, listUnsubscribe string, m *digest.Message, now time.Time, eightBitMIME bool) ([]byte, error) {
	env, err := sender.NewEnvelope(from, listUnsubscribe)
	if err != nil {
		return nil, err
	}
	msg, err := env.GoMailMsg(m, now)
	if err != nil {
		return nil, err
	}
	for _, p := range msg.GetParts() {
		if !eightBitMIME && p.GetEncoding() == gomail.NoEncoding {
			p.SetEncoding(gomail.EncodingQP)
		}
	}
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	w := textproto.NewWriter(bw).DotWriter()
	if _, err := msg.WriteTo(w); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ChunkIdle is chunkIdle, for the tests of package smtp_test.
const ChunkIdle = chunkIdle
