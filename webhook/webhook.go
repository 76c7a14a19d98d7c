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
// # Where the key travels
//
// Every message carries its digest key in X-Digest-Key and in a field
// each provider hands back in its events:
//
//	provider  the message sets                        the event reports
//	postmark  X-PM-Metadata-digest-key: KEY           Metadata["digest-key"]
//	ses       X-SES-MESSAGE-TAGS: digest-key=TAG      mail.tags["digest-key"]; also mail.headers X-Digest-Key
//	sendgrid  X-SMTPAPI: {"unique_args":{"digest_key":KEY}}  the event's field "digest_key"
//	mailgun   X-Mailgun-Variables: {"digest_key":KEY}  event-data.user-variables["digest_key"]
//	resend    X-Digest-Key: KEY                       data.headers X-Digest-Key, or data.tags "digest-key" (TAG) or "digest_key"
//
// TAG is TagValue(KEY): the key id, '_' and the hex, since tag values
// allow no ':' (a key id with '.' has no tag form: SES then needs the
// headers in its events, which event publishing includes). A field that
// does not hold a valid key is no key: the event still counts, keyless.
//
// # What the operator configures at each provider
//
//	postmark  a webhook (Bounce, Spam Complaint, Delivery, Subscription Change) to
//	          https://USER:PASSWORD@host/path; USER:PASSWORD in Files.PostmarkCredentials
//	ses       a configuration set publishing Send, Delivery, Bounce, Complaint to an SNS
//	          topic (or identity notifications), subscribed over HTTPS; the topic's ARN
//	          in Options.SESTopics; the subscription is confirmed by the intake (Batch.Confirm)
//	sendgrid  the Event Webhook with signature verification on (processed, delivered,
//	          bounce, dropped, deferred, spamreport, unsubscribe); its verification key
//	          in Files.SendGridPublicKey
//	mailgun   webhooks for accepted, delivered, permanent and temporary failure,
//	          complained, unsubscribed; the HTTP webhook signing key in Files.MailgunSigningKey
//	resend    a webhook for email.sent, email.delivered, email.bounced, email.complained,
//	          email.delivery_delayed; its signing secret (whsec_...) in Files.ResendSecret
//
// # Verification and replays
//
// Postmark signs nothing: its requests carry HTTP Basic credentials,
// compared in constant time. SNS messages are signed with RSA (SHA1 or
// SHA256, as the topic's SignatureVersion says) by a certificate pinned
// from a file or fetched from an sns.REGION.amazonaws.com(.cn) URL over
// HTTPS; SendGrid's with ECDSA P-256 over timestamp and body; Mailgun's
// with HMAC-SHA256 over timestamp and token only (not the event: TLS keeps
// the body intact); Resend's by Svix with HMAC-SHA256 over id, timestamp
// and body. A signed timestamp further than the tolerance (DefaultTolerance,
// 5 minutes) from the receiver's clock is refused as ErrSignature. A
// redelivered event keeps its Event.ID (the provider's id, or a digest of
// the fields that identify it), so the intake stores it once.
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
	// ErrContentType, or ErrUnavailable when the request could not be
	// verified for now; none quotes an address or a secret.
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
