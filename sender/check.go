package sender

import (
	"context"
	"fmt"
	"strings"

	"github.com/weeklydigest/digest/digest"
)

// Check does what a send does before its first message, once: it connects
// to the SMTP server cfg names (TCP, or TLS for implicit TLS), says EHLO,
// STARTTLS as cfg.SMTP.TLS requires, AUTH when a user is set, and then
// QUIT. It sends no message. A dry run calls it so that a server a real run
// could not use shows before the week goes out, not during it.
//
// Errors wrap ErrDial (no usable session) and never contain the password.
func Check(ctx context.Context, cfg MailerConfig) error {
	cfg.Concurrency = 1
	m, err := NewSMTPMailer(cfg)
	if err != nil {
		return err
	}
	c := &conn{}
	if err := m.dial(ctx, c); err != nil {
		return fmt.Errorf("%w %s: %w", ErrDial, m.addr, err)
	}
	defer m.drop(c)
	if err := c.smtp.Quit(); err != nil {
		return fmt.Errorf("smtp %s: QUIT: %w", m.addr, err)
	}
	return nil
}

// checkKey is a key no digest has: its hex part is all zeros, which no
// HMAC-SHA256 yields in practice.
var checkKey = digest.Key("check:" + strings.Repeat("0", 64))

// CheckLookup asks l about a key no digest has: a look-up that answers
// "not found" can be reached and accepts its credentials. It returns the
// look-up's error otherwise, and an error if such a key is found.
func CheckLookup(ctx context.Context, l digest.Lookup) error {
	ref, found, err := l.Lookup(ctx, checkKey)
	if err != nil {
		return err
	}
	if found {
		return fmt.Errorf("look-up found a message for the probe key %s (reference %q): it does not filter by key", checkKey, clip(ref))
	}
	return nil
}
