package digest

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Address is a mailbox: a display name and an address.
type Address struct {
	Name  string
	Email string
}

// Message is one rendered digest ready to send. The mailer derives the
// Message-ID and the look-up header from Key, so every retry of the same
// digest carries the same identity to the provider.
type Message struct {
	Key     Key
	To      Address
	Subject string
	Text    string
	HTML    string
	// Unsubscribe is the recipient's own unsubscribe URI (https: for a
	// one-click List-Unsubscribe, or mailto:), or "" (run.Runner.Unsubscribe).
	Unsubscribe string
	// Test marks a test send ("digest send-test"): the mailers prefix the
	// subject with "[TEST] " and add the header X-Digest-Test: 1. Its Key
	// is a TestKey, outside every receipt.
	Test bool
}

// ErrNoTime is wrapped by a Mailer's temporary error when it did not start
// a send because the claim's lease (the context's deadline) would end
// before the send could: nothing reached the provider, and the claim is
// given back unsent.
var ErrNoTime = errors.New("not sent: the claim's lease would end before the send could")

// Mailer hands messages to a provider. Send returns the provider's reference
// for an accepted message, or an error that SendClassOf classifies.
// Implementations are safe for concurrent use.
type Mailer interface {
	Send(ctx context.Context, m *Message) (ref string, err error)
	Close() error
}

// Lookup asks a provider whether the message carrying key was accepted.
type Lookup interface {
	// Lookup returns found with the provider's reference, or found false
	// when the provider has no such message. An error means it could not
	// tell; the caller must then not send.
	Lookup(ctx context.Context, key Key) (ref string, found bool, err error)
}

// SendClass says what a failed send means for the receipt.
type SendClass int

// Send failure classes.
const (
	// SendAmbiguous: the message may have been accepted (the connection
	// was lost after the data went out). Never resend before a look-up.
	// Unclassified errors are ambiguous: the safe assumption.
	SendAmbiguous SendClass = iota
	// SendTemporary: not accepted; try again later (4xx, 429, refused
	// connection, timeout before the data was sent).
	SendTemporary
	// SendPermanent: not accepted and never will be (5xx, bad address).
	SendPermanent
	// SendFatal: not sent, and no send through this mailer can succeed
	// until its configuration changes: TLS required but not offered,
	// authentication refused, an unknown host, an invalid certificate. A
	// run stops at the first one; retrying would only spin.
	SendFatal
)

func (c SendClass) String() string {
	switch c {
	case SendTemporary:
		return "temporary"
	case SendPermanent:
		return "permanent"
	case SendFatal:
		return "fatal"
	default:
		return "ambiguous"
	}
}

// SendError is a classified send failure.
type SendError struct {
	Class   SendClass
	RetryAt time.Time // with SendTemporary: the earliest retry the provider asked for, or zero
	// Kind names the failure without customer data, for counting failures
	// by kind: KindConnect, "starttls", "RCPT TO 550", …; "" when the
	// mailer does not say (the class alone is then the kind).
	Kind string
	// Throttled, with SendTemporary, says the provider refused for every
	// message for now, not for one recipient: an SMTP 421 (service not
	// available) or an HTTP 429 (too many requests). A 450/451/452 to one
	// RCPT (greylisting, a full mailbox) is not throttling.
	Throttled bool
	Err       error
}

// KindConnect is the SendError.Kind of a send that failed before a session
// with the server existed (refused, timed out, reset): the server may be
// down. A run stops early when every send fails this way (see package run).
const KindConnect = "connect"

// ThrottledOf reports whether err is a *SendError that says the provider
// throttles (SendError.Throttled).
func ThrottledOf(err error) bool {
	var se *SendError
	return errors.As(err, &se) && se.Throttled
}

// KindOf returns the Kind a *SendError carries, or "".
func KindOf(err error) string {
	var se *SendError
	if errors.As(err, &se) {
		return se.Kind
	}
	return ""
}

func (e *SendError) Error() string { return fmt.Sprintf("%s: %v", e.Class, e.Err) }
func (e *SendError) Unwrap() error { return e.Err }

// SendClassOf returns the class of a send error: the Class of the *SendError in
// its chain, or SendAmbiguous for any other error, since an unexplained
// failure may have reached the provider.
func SendClassOf(err error) SendClass {
	var se *SendError
	if errors.As(err, &se) {
		return se.Class
	}
	return SendAmbiguous
}

// RetryAtOf returns the retry time a *SendError carries, or zero.
func RetryAtOf(err error) time.Time {
	var se *SendError
	if errors.As(err, &se) {
		return se.RetryAt
	}
	return time.Time{}
}
