package webhook

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The headers of SendGrid's Signed Event Webhook.
const (
	SendGridSignatureHeader = "X-Twilio-Email-Event-Webhook-Signature"
	SendGridTimestampHeader = "X-Twilio-Email-Event-Webhook-Timestamp"
)

// SendGrid reads SendGrid's signed Event Webhook: ECDSA P-256 over the
// timestamp header followed by the raw body
// (https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features).
type SendGrid struct {
	key       *ecdsa.PublicKey
	tolerance time.Duration
}

// NewSendGrid returns the SendGrid provider for the verification key as
// SendGrid shows it: base64 of the DER public key.
func NewSendGrid(publicKey []byte, tolerance time.Duration) (*SendGrid, error) {
	s := strings.TrimSpace(string(publicKey))
	if s == "" {
		return nil, errors.New("sendgrid verification key is empty")
	}
	der, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("sendgrid verification key is not base64")
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, errors.New("sendgrid verification key is not a DER public key")
	}
	ec, ok := pub.(*ecdsa.PublicKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, errors.New("sendgrid verification key is not an ECDSA P-256 key")
	}
	return &SendGrid{key: ec, tolerance: orDefault(tolerance)}, nil
}

// Name returns "sendgrid".
func (*SendGrid) Name() string { return "sendgrid" }

// sendGridEvent is one event of the batch
// (https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/event).
// Custom arguments are top-level fields, digest_key among them.
type sendGridEvent struct {
	Email     string          `json:"email"`
	Timestamp json.Number     `json:"timestamp"`
	Event     string          `json:"event"`
	EventID   string          `json:"sg_event_id"`
	MessageID string          `json:"sg_message_id"`
	Type      string          `json:"type"`
	Status    string          `json:"status"`
	Reason    string          `json:"reason"`
	Key       json.RawMessage `json:"digest_key"`
}

// Parse verifies the signature and the timestamp's age, and reads the
// batch of events.
func (s *SendGrid) Parse(_ context.Context, header http.Header, body []byte, now time.Time) (Batch, error) {
	if err := s.verify(header.Get(SendGridSignatureHeader), header.Get(SendGridTimestampHeader), body, now); err != nil {
		return Batch{}, err
	}
	var list []sendGridEvent
	if err := readJSON(header, body, &list, "sendgrid event batch"); err != nil {
		return Batch{}, err
	}
	events := make([]Event, 0, len(list))
	for _, e := range list {
		at, err := eventTime(e.Timestamp, now, "a sendgrid timestamp")
		if err != nil {
			return Batch{}, err
		}
		ev := Event{Provider: s.Name(), ID: e.EventID, Key: rawKey(e.Key), Address: e.Email, At: at}
		ev.Kind, ev.Detail = sendGridKind(e)
		if ev.ID == "" {
			ev.ID = derivedID(e.Event, e.MessageID, e.Email, e.Timestamp.String())
		}
		events = append(events, ev)
	}
	return Batch{Events: events}, nil
}

// verify checks the ECDSA signature over timestamp+body, and the age.
func (s *SendGrid) verify(signature, timestamp string, body []byte, now time.Time) error {
	if signature == "" || timestamp == "" {
		return fmt.Errorf("%w: no %s or %s header", ErrSignature, SendGridSignatureHeader, SendGridTimestampHeader)
	}
	sig, err := base64.StdEncoding.DecodeString(signature)
	if err != nil {
		return fmt.Errorf("%w: sendgrid signature is not base64", ErrSignature)
	}
	h := sha256.New()
	h.Write([]byte(timestamp))
	h.Write(body)
	if !ecdsa.VerifyASN1(s.key, h.Sum(nil), sig) {
		return fmt.Errorf("%w: sendgrid signature does not match", ErrSignature)
	}
	return checkUnixAge(timestamp, now, s.tolerance, "sendgrid timestamp")
}

// sendGridKind maps an event. A bounce of type "blocked" is soft (the
// receiver refused for now), type "bounce" hard. A drop is SendGrid
// refusing to send to an address on its own suppression lists: it says
// why the address is dead.
func sendGridKind(e sendGridEvent) (Kind, string) {
	switch e.Event {
	case "processed":
		return KindAccepted, ""
	case "delivered":
		return KindDelivered, ""
	case "bounce":
		if e.Type == "blocked" {
			return KindSoftBounce, detail(e.Type, e.Status)
		}
		return KindHardBounce, detail(e.Type, e.Status)
	case "dropped":
		switch e.Reason {
		case "Bounced Address", "Invalid":
			return KindHardBounce, detail("dropped", e.Reason)
		case "Spam Reporting Address":
			return KindComplaint, detail("dropped", e.Reason)
		case "Unsubscribed Address":
			return KindUnsubscribe, detail("dropped", e.Reason)
		}
		return KindOther, "dropped"
	case "spamreport":
		return KindComplaint, ""
	case "unsubscribe", "group_unsubscribe":
		return KindUnsubscribe, detail(e.Event)
	default:
		// deferred, open, click, group_resubscribe and events added later.
		return KindOther, detail(e.Event)
	}
}
