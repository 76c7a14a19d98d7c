package sender

import (
	"io"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// WriteMessage writes m as the RFC 5322 message the SMTP mailer and the
// outbox send for it (the same headers, parts and encoding), dated now,
// for a preview. from and listUnsubscribe are as in MailerConfig.
func WriteMessage(w io.Writer, m *digest.Message, from digest.Address, listUnsubscribe string, now time.Time) error {
	env, err := newEnvelope(from, listUnsubscribe)
	if err != nil {
		return err
	}
	msg, err := env.build(m, now)
	if err != nil {
		return err
	}
	_, err = msg.WriteTo(w)
	return err
}
