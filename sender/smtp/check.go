package smtp

import (
	"context"
	"fmt"
)

// CheckConnection does what a send does before its first message, once:
// it connects to the SMTP server cfg names (TCP, or TLS for implicit TLS),
// says EHLO, STARTTLS as cfg.SMTP.TLS requires, AUTH when a user is set,
// and then QUIT. It sends no message. A dry run calls it so that a server
// a real run could not use shows before the week goes out, not during it.
//
// Errors wrap ErrDial (no usable session) in a *digest.SendError whose
// class says whether a retry could help (see dialError), and never contain
// the password.
func CheckConnection(ctx context.Context, cfg Config) error {
	cfg.Concurrency = 1
	m, err := NewMailer(cfg)
	if err != nil {
		return err
	}
	c := &conn{}
	if err := m.dial(ctx, c); err != nil {
		return dialError(m.addr, err)
	}
	defer m.drop(c)
	if err := c.smtp.Quit(); err != nil {
		return fmt.Errorf("smtp %s: QUIT: %w", m.addr, err)
	}
	return nil
}
