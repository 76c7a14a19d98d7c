package sender

import (
	"bytes"
	"io"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// Render returns m as the RFC 5322 message the Mailer sends for it (the
// same headers, parts and encoding), dated now. Its errors are permanent
// (*digest.SendError): the same message never becomes valid by retrying.
func (e Envelope) Render(m *digest.Message, now time.Time) ([]byte, error) {
	msg, err := e.build(m, now)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := msg.WriteTo(&buf); err != nil {
		return nil, permanent(err)
	}
	// 8bit parts end lines with LF, which DATA sends as CRLF: so here.
	return crlf(buf.Bytes()), nil
}

// WriteMessage writes m as the RFC 5322 message the SMTP mailer and the
// outbox send for it (the same headers, parts and encoding), dated now,
// for a preview. from and listUnsubscribe are as in Config.
func WriteMessage(w io.Writer, m *digest.Message, from digest.Address, listUnsubscribe string, now time.Time) error {
	env, err := NewEnvelope(from, listUnsubscribe)
	if err != nil {
		return err
	}
	b, err := env.Render(m, now)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// crlf ends every line of b with CRLF.
func crlf(b []byte) []byte {
	return bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
}
