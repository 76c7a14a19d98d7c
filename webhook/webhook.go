// Package webhook reads the event webhooks of mail providers: Postmark,
// Amazon SES through SNS, SendGrid's Event Webhook, Mailgun and Resend
// (Svix). Each Provider verifies a request's signature with keys read from
// files and turns the provider's documented payload into Events: what
// happened (accepted, delivered, bounced hard or soft, complained), to
// which digest key and address, and when. It records nothing itself: the
// intake of "digest serve" (package listen) stores the events in the
// ledger, suppresses on hard bounces and complaints, and answers the
// provider.
//
// The package imports only the domain (digest) and the standard library.
package webhook

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// Kind is what an event says happened to a message.
type Kind string

// The kinds of events. Providers name them differently; each Provider
// maps its own names onto these, and anything else onto KindOther.
const (
	// KindAccepted: the provider took the message for delivery (Postmark's
	// and SES's "Send", SendGrid's "processed", Mailgun's "accepted",
	// Resend's "email.sent"). Proof the key reached the provider.
	KindAccepted Kind = "accepted"
	// KindDelivered: the receiving server accepted it.
	KindDelivered Kind = "delivered"
	// KindHardBounce: permanent failure; the address is suppressed at once.
	KindHardBounce Kind = "hard_bounce"
	// KindSoftBounce: temporary failure; counted, suppressed after a streak.
	KindSoftBounce Kind = "soft_bounce"
	// KindComplaint: the recipient reported spam; suppressed at once.
	KindComplaint Kind = "complaint"
	// KindUnsubscribe: the provider's own unsubscribe (list-unsubscribe it
	// handled itself); suppressed at once.
	KindUnsubscribe Kind = "unsubscribe"
	// KindOther: a valid event the job does not act on (opens, clicks,
	// deferrals...): counted, not stored.
	KindOther Kind = "other"
)

// Event is one provider event, verified and parsed.
type Event struct {
	// Provider is the Provider's Name.
	Provider string
	// ID identifies the event at the provider, for replay detection: the
	// provider's own event id where it has one, else a digest of the
	// event's identifying fields. Unique per provider.
	ID string
	// Kind is what happened.
	Kind Kind
	// Key is the digest key the message carried (its key header, metadata,
	// tag or custom argument), zero when the event names none.
	Key digest.Key
	// Address is the recipient as the provider reports it. The intake
	// hashes it (Keyring.AddressKeys) and drops it: it is never stored or
	// logged.
	Address string
	// At is when it happened, by the provider's clock.
	At time.Time
	// Detail is a short, customer-free description for the history: the
	// provider's bounce type or SMTP status ("HardBounce", "5.1.1").
	Detail string
}

// Batch is what one webhook request carries.
type Batch struct {
	Events []Event
	// Confirm is set for a subscription handshake (SNS's
	// SubscriptionConfirmation): the intake calls it, and the request
	// carries no events.
	Confirm func(ctx context.Context) error
}

// Provider verifies and parses one provider's webhook requests.
type Provider interface {
	// Name is the provider's name in URLs, metrics and the ledger:
	// "postmark", "ses", "sendgrid", "mailgun", "resend".
	Name() string
	// Parse verifies the request (its signature, its timestamp's age) and
	// returns its events. Errors wrap ErrSignature, ErrPayload or
	// ErrContentType; none quotes an address or a secret.
	Parse(ctx context.Context, header http.Header, body []byte, now time.Time) (Batch, error)
}

// Errors of Parse. The intake answers ErrSignature with 401, the others
// with 400 (ErrContentType 415), and records nothing. Any other error
// (ErrUnavailable, or a Confirm's) is the receiver's trouble, not the
// request's: answered 503 so that the provider retries.
var (
	ErrSignature   = errors.New("webhook signature not verified")
	ErrPayload     = errors.New("webhook payload not understood")
	ErrContentType = errors.New("webhook content type not supported")
	// ErrUnavailable: the request could not be verified for now (SES: the
	// signing certificate could not be fetched).
	ErrUnavailable = errors.New("webhook verification unavailable")
)
