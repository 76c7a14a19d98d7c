package sender

import (
	"io"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/weeklydigest/digest/digest"
)

// ContentWriter takes a composed message (Letter.Compose): a buffer,
// whose writes never fail, such as the SMTP adapter's, which frames the
// lines for DATA or BDAT as they come.
type ContentWriter interface {
	io.Writer
	io.StringWriter
}

// Sender is MAIL FROM's path: "<from>".
func (l *Letter) Sender() string { return l.sender }

// Rcpts are RCPT TO's paths: "<to>", the recipient's domain as an
// A-label.
func (l *Letter) Rcpts() []string { return l.rcpts[:] }

// MessageID is the Message-ID header's value, "<hex@domain>": the
// reference of a send whose server says nothing after accepting.
func (l *Letter) MessageID() string { return l.messageID }

// Release returns l to the pool it came from; l must not be used after.
func (l *Letter) Release() { putLetter(l) }

// GoMailMsg returns m as a go-mail message with the headers of Letter: the
// reference composer that Letter.Compose's bytes are pinned to, and the
// message Render writes. Its errors are permanent.
func (e Envelope) GoMailMsg(m *digest.Message, now time.Time) (*gomail.Msg, error) {
	return e.build(m, now)
}

// writeGoMail writes msg into w, its 8bit parts quoted-printable for a
// server without 8BITMIME (RFC 6152). msg is left as built: a later
// attempt, on a new connection, chooses again for its server.
func writeGoMail(w io.Writer, msg *gomail.Msg, eightBitMIME bool) error {
	changed := encodeFor8BitMIME(msg, eightBitMIME)
	defer func() {
		for _, p := range changed {
			p.SetEncoding(gomail.NoEncoding)
		}
	}()
	_, err := msg.WriteTo(w)
	return err
}

// headBuffer is where Compose builds a message's header before writing it
// through the adapter's buffer at once.
type headBuffer struct{ b []byte }

var headBuffers = sync.Pool{New: func() any { return &headBuffer{b: make([]byte, 0, 2<<10)} }}

func getHeadBuffer() *headBuffer {
	h := headBuffers.Get().(*headBuffer)
	h.b = h.b[:0]
	return h
}

func putHeadBuffer(h *headBuffer) { headBuffers.Put(h) }
