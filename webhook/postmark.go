package webhook

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// PostmarkMetadataKey is the Postmark metadata field that carries the
// digest key: the message sets it with the header
// X-PM-Metadata-digest-key (sender.HeaderPostmarkKey).
const PostmarkMetadataKey = "digest-key"

// Postmark reads Postmark's webhooks: Bounce, SpamComplaint, Delivery and
// SubscriptionChange. Postmark signs nothing; the webhook URL carries
// HTTP Basic credentials (https://user:pass@host/...), checked here.
type Postmark struct {
	// user and pass are kept as digests, compared in constant time.
	user, pass [sha256.Size]byte
}

// NewPostmark returns the Postmark provider for credentials "user:pass",
// as the operator writes them into the webhook URL at Postmark.
func NewPostmark(credentials []byte) (*Postmark, error) {
	s := strings.TrimSpace(string(credentials))
	user, pass, ok := strings.Cut(s, ":")
	switch {
	case s == "":
		return nil, errors.New("postmark credentials are empty")
	case !ok || user == "" || pass == "":
		return nil, errors.New("postmark credentials must be user:password, both non-empty")
	case strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return nil, errors.New("postmark credentials contain a space or control character")
	}
	return &Postmark{user: sha256.Sum256([]byte(user)), pass: sha256.Sum256([]byte(pass))}, nil
}

// Name returns "postmark".
func (*Postmark) Name() string { return "postmark" }

// GoString hides the credentials from %#v.
func (*Postmark) GoString() string { return "webhook.Postmark{credentials hidden}" }

// postmarkRecord is the union of the fields of the record types read.
type postmarkRecord struct {
	RecordType        string
	ID                *int64
	Type              string
	TypeCode          int
	MessageID         string
	Email             string // Bounce, SpamComplaint
	Recipient         string // Delivery, SubscriptionChange
	BouncedAt         string
	DeliveredAt       string
	ChangedAt         string
	SuppressSending   bool
	SuppressionReason string
	Metadata          map[string]string
}

// Parse checks the Basic credentials and reads one record.
func (p *Postmark) Parse(_ context.Context, header http.Header, body []byte, now time.Time) (Batch, error) {
	if err := p.authenticate(header); err != nil {
		return Batch{}, err
	}
	var r postmarkRecord
	if err := readJSON(header, body, &r, "postmark record"); err != nil {
		return Batch{}, err
	}
	ev := Event{Provider: p.Name(), Key: parseKey(r.Metadata[PostmarkMetadataKey])}
	var at string
	switch r.RecordType {
	case "Bounce", "SpamComplaint":
		ev.Address, at = r.Email, r.BouncedAt
		ev.Kind = postmarkBounceKind(r.Type)
		if r.RecordType == "SpamComplaint" {
			ev.Kind = KindComplaint
		}
		ev.Detail = detail(r.Type)
		if r.ID != nil {
			ev.ID = r.RecordType + ":" + strconv.FormatInt(*r.ID, 10)
		}
	case "Delivery":
		ev.Address, at, ev.Kind = r.Recipient, r.DeliveredAt, KindDelivered
	case "SubscriptionChange":
		ev.Address, at = r.Recipient, r.ChangedAt
		ev.Kind, ev.Detail = postmarkSuppressionKind(r.SuppressSending, r.SuppressionReason), detail(r.SuppressionReason)
	default:
		// Opens, clicks, inbound and record types added later.
		ev.Kind, ev.Detail = KindOther, detail(r.RecordType)
		ev.Address = r.Recipient
		if ev.Address == "" {
			ev.Address = r.Email
		}
	}
	t, err := parseTime(at, now)
	if err != nil {
		return Batch{}, err
	}
	ev.At = t
	if ev.ID == "" {
		ev.ID = derivedID(r.RecordType, r.MessageID, r.Email, r.Recipient, at, r.SuppressionReason, strconv.FormatBool(r.SuppressSending))
	}
	return Batch{Events: []Event{ev}}, nil
}

// authenticate compares the request's Basic credentials with p's in
// constant time (digests of equal length, both compared whatever the
// first gives).
func (p *Postmark) authenticate(header http.Header) error {
	r := http.Request{Header: header}
	user, pass, ok := r.BasicAuth()
	if !ok {
		return fmt.Errorf("%w: no HTTP Basic credentials", ErrSignature)
	}
	u, pw := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
	if subtle.ConstantTimeCompare(u[:], p.user[:])&subtle.ConstantTimeCompare(pw[:], p.pass[:]) != 1 {
		return fmt.Errorf("%w: wrong HTTP Basic credentials", ErrSignature)
	}
	return nil
}

// postmarkBounceKind maps Postmark's bounce types
// (https://postmarkapp.com/developer/api/bounce-api#bounce-types) onto
// kinds. Hard: the address does not exist or Postmark deactivated it.
// Soft: the address may work later (mailbox full, DNS, blocked by the
// receiver). Other: not about the address (auto-replies, the sender's own
// setup: DMARC, unconfirmed signature, template, API errors).
func postmarkBounceKind(t string) Kind {
	switch t {
	case "HardBounce", "BadEmailAddress", "ManuallyDeactivated":
		return KindHardBounce
	case "Transient", "SoftBounce", "DnsError", "Blocked", "Unknown", "SpamNotification":
		return KindSoftBounce
	case "SpamComplaint":
		return KindComplaint
	case "Unsubscribe":
		return KindUnsubscribe
	default:
		// Subscribe, AutoResponder, AddressChange, OpenRelayTest,
		// VirusNotification, ChallengeVerification, SMTPApiError, InboundError, DMARCPolicy, Unconfirmed,
		// TemplateRenderingFailed and types added later.
		return KindOther
	}
}

// postmarkSuppressionKind maps a SubscriptionChange: a suppression by
// reason (a recipient's unsubscribe is a ManualSuppression), a
// reactivation is KindOther (suppressions of our own are lifted by an
// operator, not by the provider).
func postmarkSuppressionKind(suppress bool, reason string) Kind {
	if !suppress {
		return KindOther
	}
	switch reason {
	case "HardBounce":
		return KindHardBounce
	case "SpamComplaint":
		return KindComplaint
	case "ManualSuppression":
		return KindUnsubscribe
	default:
		return KindOther
	}
}
