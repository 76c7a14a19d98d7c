package run

import (
	"context"
	"errors"
	"fmt"

	"github.com/weeklydigest/digest/digest"
)

// errNoSMTPUTF8 is the reason an address with a non-ASCII local part is a
// bad record when the mailer's server does not offer SMTPUTF8.
var errNoSMTPUTF8 = errors.New("has a non-ASCII local part and the SMTP server does not offer SMTPUTF8 (RFC 6531)")

// unsendableAddress returns a bad record for rec when the mailer cannot
// take its address: a non-ASCII local part (jörg@example.com) on a server
// without SMTPUTF8, or one whose server could not tell. Such a record is
// never claimed: claimed, it would fail at the server, permanently, and
// the week would look complete. The mailer asks its server once.
func (r *Runner) unsendableAddress(ctx context.Context, rec digest.Record) *digest.BadRecordError {
	email := rec.Customer.Email
	m, ok := r.Mailer.(digest.UTF8Mailer)
	if !ok || digest.ASCIILocalPart(email) {
		return nil
	}
	offered, err := m.SMTPUTF8(ctx)
	switch {
	case err != nil:
		err = fmt.Errorf("has a non-ASCII local part and whether the SMTP server offers SMTPUTF8 is unknown: %w", err)
	case !offered:
		err = errNoSMTPUTF8
	default:
		return nil
	}
	return &digest.BadRecordError{Where: "customer_id=" + rec.Customer.ID, Field: "email", Err: err}
}

// unsendableAttrs are the log attributes of such a record: badRecordAttrs
// and the address's address_key, never the address.
func (r *Runner) unsendableAttrs(bad *digest.BadRecordError, email string) []any {
	attrs := r.badRecordAttrs(bad)
	if r.Keyring != nil {
		attrs = append(attrs, "address_key", r.Keyring.AddressKey(email))
	}
	return attrs
}
