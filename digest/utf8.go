package digest

import (
	"context"
	"strings"
	"unicode/utf8"
)

// UTF8Mailer is a Mailer that can tell whether its server takes an address
// with a non-ASCII local part (jörg@example.com): only one that offers
// SMTPUTF8 (RFC 6531) does. A run asks it before claiming such an address,
// so that an address the server cannot take is a bad record, counted and
// named by its address_key, never a claim that fails at the server.
type UTF8Mailer interface {
	Mailer
	// SMTPUTF8 reports whether the server offers SMTPUTF8. An error means
	// it could not tell (the server is unreachable).
	SMTPUTF8(ctx context.Context) (bool, error)
}

// ASCIILocalPart reports whether email's local part (before its last @)
// is plain ASCII, which every server takes. An internationalized domain
// does not need SMTPUTF8: it goes in its A-label form.
func ASCIILocalPart(email string) bool {
	at := strings.LastIndexByte(email, '@')
	if at < 0 {
		at = len(email)
	}
	for i := 0; i < at; i++ {
		if email[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
