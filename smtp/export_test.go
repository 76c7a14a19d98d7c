package smtp

import (
	"bufio"
	"bytes"
	"net/textproto"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// DotWriterData returns what the mailer wrote after DATA, final dot
// included, before it composed messages itself: go-mail's Msg.WriteTo
// through net/textproto's dotWriter (go-mail's DataCloser), for a server
// that does or does not advertise 8BITMIME. The wire tests pin the
// mailer's bytes to it.
func DotWriterData(from digest.Address, listUnsubscribe string, m *digest.Message, now time.Time, eightBitMIME bool) ([]byte, error) {
	env, err := NewEnvelope(from, listUnsubscribe)
	if err != nil {
		return nil, err
	}
	msg, err := env.build(m, now)
	if err != nil {
		return nil, err
	}
	encodeFor8BitMIME(msg, eightBitMIME)
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
