package digest

import (
	"fmt"
	"net/mail"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The rules every source applies to the fields of a record: the JSON Lines
// file and the PostgreSQL relations call the same functions, so a record
// one source refuses the other refuses too (docs/bad-input.md).
// CheckCustomer and CheckActivity apply them to a whole customer or row;
// the file applies each as it parses the field, to name it in its path.

// AddressError is an email field that is not a bare address. Its text never
// holds the address (logs and errors quote it by its address_key, see
// Keyring.AddressKey); Address is for the caller that can key it.
type AddressError struct {
	Address string
	Reason  string
}

func (e *AddressError) Error() string {
	return "is not a bare email address such as name@example.com (" + e.Reason + ")"
}

// CheckEmail accepts a bare address such as a@example.com: valid UTF-8,
// no white space or control character, no display name, no angle brackets,
// no quoted or commented parts.
func CheckEmail(s string) error {
	bad := func(reason string) error { return &AddressError{Address: s, Reason: reason} }
	switch {
	case s == "":
		return bad("empty")
	case !utf8.ValidString(s):
		return bad("not valid UTF-8")
	case strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return bad("white space or a control character")
	case strings.ContainsAny(s, `<>"(),;`):
		return bad("a display name, angle brackets, quotes or a comment")
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || a.Name != "" {
		return bad("not of the form local@domain")
	}
	return nil
}

// CheckText accepts free text (a name, a description): valid UTF-8 without
// NUL. Invalid bytes are refused rather than replaced by U+FFFD: the
// customer would be greeted with the replacement characters and the
// fingerprint taken of the mangled text.
func CheckText(s string) error {
	if !utf8.ValidString(s) {
		for i, r := range s {
			if r == utf8.RuneError {
				if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
					return fmt.Errorf("is not valid UTF-8 (byte %d: 0x%02x)", i, s[i])
				}
			}
		}
		return fmt.Errorf("is not valid UTF-8")
	}
	if i := strings.IndexByte(s, 0); i >= 0 {
		return fmt.Errorf("contains a NUL character (byte %d)", i)
	}
	return nil
}

// CheckCustomerID applies the rules of Identity to a customer id, so that
// every customer of a valid snapshot can be keyed.
func CheckCustomerID(s string) error {
	// Any week, type and version that are valid leave only the customer
	// to be judged.
	id := Identity{Customer: s, Week: ISOWeek{Year: 2026, Week: 1}, Type: "t", Version: "v"}
	return id.Validate()
}

// CheckLocale accepts "" or the shape of a BCP 47 tag: ASCII letters and
// digits in '-'-separated subtags of 1 to 8 characters, at most 35 in all.
func CheckLocale(s string) error {
	if s == "" {
		return nil
	}
	ok := len(s) <= 35
	for _, sub := range strings.Split(s, "-") {
		ok = ok && len(sub) >= 1 && len(sub) <= 8 &&
			strings.IndexFunc(sub, func(r rune) bool { return r > unicode.MaxASCII || !unicode.IsLetter(r) && !unicode.IsDigit(r) }) < 0
	}
	if !ok {
		return fmt.Errorf("%q is not a BCP 47 language tag such as en-GB", s)
	}
	return nil
}

// CheckKind accepts snake_case: 1 to 64 of a-z, 0-9 and '_'.
func CheckKind(s string) error {
	if s == "" || len(s) > 64 || strings.IndexFunc(s, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') }) >= 0 {
		return fmt.Errorf("%q is not a kind such as card_payment (1 to 64 of a-z, 0-9, '_')", s)
	}
	return nil
}

// CheckCurrency accepts an ISO 4217 code known to the renderer, in upper
// case.
func CheckCurrency(s string) error {
	if !ValidCurrency(s) {
		return fmt.Errorf("%q is not an ISO 4217 currency code such as EUR", s)
	}
	return nil
}

// FieldError is a field of a record that breaks a rule.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// CheckCustomer applies the field rules to c: customer_id, email, name
// and locale.
func CheckCustomer(c Customer) *FieldError {
	return firstBad(
		fieldCheck{"customer_id", CheckCustomerID, c.ID},
		fieldCheck{"email", CheckEmail, c.Email},
		fieldCheck{"name", CheckText, c.Name},
		fieldCheck{"locale", CheckLocale, c.Locale},
		fieldCheck{"time_zone", ValidTimeZone, c.TimeZone},
	)
}

// CheckActivity applies the field rules to a: kind, currency and
// description (amounts are 64-bit integers by type).
func CheckActivity(a Activity) *FieldError {
	return firstBad(
		fieldCheck{"kind", CheckKind, a.Kind},
		fieldCheck{"currency", CheckCurrency, a.Currency},
		fieldCheck{"description", CheckText, a.Description},
	)
}

// fieldCheck is one field's value and its rule.
type fieldCheck struct {
	name  string
	check func(string) error
	v     string
}

// firstBad returns the first field that breaks its rule, or nil.
func firstBad(checks ...fieldCheck) *FieldError {
	for _, f := range checks {
		if err := f.check(f.v); err != nil {
			return &FieldError{f.name, err}
		}
	}
	return nil
}
