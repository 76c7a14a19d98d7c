package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Mailgun reads Mailgun's webhooks (JSON, one event a request), signed in
// the body: HMAC-SHA256 of timestamp+token under the webhook signing key
// (https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks).
type Mailgun struct {
	key       []byte
	tolerance time.Duration
}

// NewMailgun returns the Mailgun provider for the HTTP webhook signing
// key as Mailgun shows it.
func NewMailgun(signingKey []byte, tolerance time.Duration) (*Mailgun, error) {
	k := strings.TrimSpace(string(signingKey))
	switch {
	case k == "":
		return nil, errors.New("mailgun signing key is empty")
	case len(k) < 16 || strings.ContainsFunc(k, func(r rune) bool { return r <= ' ' || r > '~' }):
		return nil, errors.New("mailgun signing key must be at least 16 printable characters")
	}
	return &Mailgun{key: []byte(k), tolerance: orDefault(tolerance)}, nil
}

// Name returns "mailgun".
func (*Mailgun) Name() string { return "mailgun" }

// GoString hides the key from %#v.
func (*Mailgun) GoString() string { return "webhook.Mailgun{key hidden}" }

// mailgunRequest is a webhook request
// (https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/webhook-payloads).
type mailgunRequest struct {
	Signature struct {
		Timestamp json.RawMessage `json:"timestamp"` // documented as a string, accepted as a number
		Token     string          `json:"token"`
		Signature string          `json:"signature"`
	} `json:"signature"`
	EventData *struct {
		ID             string          `json:"id"`
		Event          string          `json:"event"`
		Timestamp      json.Number     `json:"timestamp"`
		Recipient      string          `json:"recipient"`
		Severity       string          `json:"severity"`
		Reason         string          `json:"reason"`
		UserVariables  json.RawMessage `json:"user-variables"` // an object, or [] when there are none
		DeliveryStatus struct {
			Code json.Number `json:"code"`
		} `json:"delivery-status"`
	} `json:"event-data"`
}

// Parse verifies the signature in the body and reads its event.
func (m *Mailgun) Parse(_ context.Context, header http.Header, body []byte, now time.Time) (Batch, error) {
	var r mailgunRequest
	if err := readJSON(header, body, &r, "mailgun webhook"); err != nil {
		return Batch{}, err
	}
	if err := m.verify(strings.Trim(string(r.Signature.Timestamp), `"`), r.Signature.Token, r.Signature.Signature, now); err != nil {
		return Batch{}, err
	}
	e := r.EventData
	if e == nil {
		return Batch{}, fmt.Errorf("%w: mailgun webhook has no event-data", ErrPayload)
	}
	at, err := eventTime(e.Timestamp, now, "mailgun event timestamp")
	if err != nil {
		return Batch{}, err
	}
	var vars map[string]json.RawMessage
	_ = json.Unmarshal(e.UserVariables, &vars) // [] or absent: no variables
	ev := Event{Provider: m.Name(), ID: e.ID, Key: rawKey(vars[CustomArg]), Address: e.Recipient, At: at}
	switch e.Event {
	case "accepted":
		ev.Kind = KindAccepted
	case "delivered":
		ev.Kind = KindDelivered
	case "failed":
		ev.Kind = KindSoftBounce
		if e.Severity == "permanent" {
			ev.Kind = KindHardBounce
		}
		ev.Detail = detail(e.Severity, e.Reason, e.DeliveryStatus.Code.String())
	case "complained":
		ev.Kind = KindComplaint
	case "unsubscribed":
		ev.Kind = KindUnsubscribe
	default:
		// opened, clicked, rejected, stored and events added later.
		ev.Kind, ev.Detail = KindOther, detail(e.Event)
	}
	if ev.ID == "" {
		ev.ID = derivedID(r.Signature.Token)
	}
	return Batch{Events: []Event{ev}}, nil
}

// verify checks the HMAC of timestamp+token, then the timestamp's age.
func (m *Mailgun) verify(timestamp, token, signature string, now time.Time) error {
	if timestamp == "" || token == "" || signature == "" {
		return fmt.Errorf("%w: mailgun signature fields missing", ErrSignature)
	}
	got, err := hex.DecodeString(signature)
	if err != nil {
		return fmt.Errorf("%w: mailgun signature is not hex", ErrSignature)
	}
	mac := hmac.New(sha256.New, m.key)
	mac.Write([]byte(timestamp))
	mac.Write([]byte(token))
	if !hmac.Equal(got, mac.Sum(nil)) {
		return fmt.Errorf("%w: mailgun signature does not match", ErrSignature)
	}
	return checkUnixAge(timestamp, now, m.tolerance, "mailgun timestamp")
}
