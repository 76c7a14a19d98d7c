package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// Resend reads Resend's webhooks, which Svix signs: HMAC-SHA256 of
// "svix-id.svix-timestamp.body" under the endpoint's secret, base64, in
// svix-signature as "v1,<sig>" entries separated by spaces
// (https://docs.svix.com/receiving/verifying-payloads/how-manual).
type Resend struct {
	secret    []byte
	tolerance time.Duration
}

// NewResend returns the Resend provider for the endpoint's signing secret
// as Resend shows it: "whsec_" and base64.
func NewResend(secret []byte, tolerance time.Duration) (*Resend, error) {
	s := strings.TrimSpace(string(secret))
	if s == "" {
		return nil, errors.New("resend signing secret is empty")
	}
	b64, ok := strings.CutPrefix(s, "whsec_")
	if !ok {
		return nil, errors.New("resend signing secret must start with whsec_")
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) < 16 {
		return nil, errors.New("resend signing secret must be whsec_ and the base64 of at least 16 bytes")
	}
	return &Resend{secret: key, tolerance: orDefault(tolerance)}, nil
}

// Name returns "resend".
func (*Resend) Name() string { return "resend" }

// GoString hides the secret from %#v.
func (*Resend) GoString() string { return "webhook.Resend{secret hidden}" }

// resendEvent is a Resend webhook event
// (https://resend.com/docs/dashboard/webhooks/event-types).
type resendEvent struct {
	Type      string `json:"type"`
	CreatedAt string `json:"created_at"`
	Data      struct {
		EmailID string          `json:"email_id"`
		To      []string        `json:"to"`
		Headers json.RawMessage `json:"headers"` // [{name, value}] or an object
		Tags    json.RawMessage `json:"tags"`    // an object, or [{name, value}]
		Bounce  *struct {
			Type    string `json:"type"`
			SubType string `json:"subType"`
		} `json:"bounce"`
	} `json:"data"`
}

// Parse verifies the Svix signature and timestamp and reads the event:
// one Event per recipient.
func (r *Resend) Parse(_ context.Context, header http.Header, body []byte, now time.Time) (Batch, error) {
	id := header.Get("svix-id")
	if err := r.verify(id, header.Get("svix-timestamp"), header.Get("svix-signature"), body, now); err != nil {
		return Batch{}, err
	}
	var e resendEvent
	if err := readJSON(header, body, &e, "resend event"); err != nil {
		return Batch{}, err
	}
	if e.Type == "" {
		return Batch{}, fmt.Errorf("%w: resend event has no type", ErrPayload)
	}
	at, err := parseTime(e.CreatedAt, now)
	if err != nil {
		return Batch{}, err
	}
	kind, d := resendKind(e)
	key := resendKey(e.Data.Headers, e.Data.Tags)
	to := e.Data.To
	if len(to) == 0 {
		to = []string{""}
	}
	events := make([]Event, len(to))
	for i, addr := range to {
		events[i] = Event{Provider: r.Name(), ID: id + ":" + strconv.Itoa(i), Kind: kind, Key: key, Address: addr, At: at, Detail: d}
	}
	return Batch{Events: events}, nil
}

// verify checks one of the v1 signatures, then the timestamp's age.
func (r *Resend) verify(id, timestamp, signatures string, body []byte, now time.Time) error {
	if id == "" || timestamp == "" || signatures == "" {
		return fmt.Errorf("%w: no svix-id, svix-timestamp or svix-signature header", ErrSignature)
	}
	mac := hmac.New(sha256.New, r.secret)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	ok := false
	for _, s := range strings.Fields(signatures) {
		v, sig, found := strings.Cut(s, ",")
		if !found || v != "v1" {
			continue // other schemes (v1a: asymmetric) are not configured
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			ok = true
		}
	}
	if !ok {
		return fmt.Errorf("%w: no svix v1 signature matches", ErrSignature)
	}
	return checkUnixAge(timestamp, now, r.tolerance, "svix-timestamp")
}

// resendKind maps an event type. email.bounced is a permanent rejection
// unless its bounce says Transient.
func resendKind(e resendEvent) (Kind, string) {
	switch e.Type {
	case "email.sent":
		return KindAccepted, ""
	case "email.delivered":
		return KindDelivered, ""
	case "email.bounced":
		if e.Data.Bounce != nil {
			d := detail(e.Data.Bounce.Type, e.Data.Bounce.SubType)
			if e.Data.Bounce.Type == "Transient" || e.Data.Bounce.Type == "Undetermined" {
				return KindSoftBounce, d
			}
			return KindHardBounce, d
		}
		return KindHardBounce, ""
	case "email.complained":
		return KindComplaint, ""
	default:
		// email.delivery_delayed, email.opened, email.clicked,
		// email.failed, contact and domain events, events added later.
		return KindOther, detail(e.Type)
	}
}

// resendKey finds the digest key in the event's headers (HeaderKey) or
// tags (TagName, as TagValue writes it, or CustomArg verbatim).
func resendKey(headers, tags json.RawMessage) (key digest.Key) {
	var list []nameValue
	if json.Unmarshal(headers, &list) == nil {
		key = parseKey(header(list, HeaderKey))
	} else {
		var m map[string]string
		if json.Unmarshal(headers, &m) == nil {
			for k, v := range m {
				if strings.EqualFold(k, HeaderKey) {
					key = parseKey(v)
				}
			}
		}
	}
	if key != "" {
		return key
	}
	m := map[string]string{}
	if json.Unmarshal(tags, &m) != nil {
		list = nil
		if json.Unmarshal(tags, &list) == nil {
			for _, t := range list {
				m[t.Name] = t.Value
			}
		}
	}
	if k := KeyFromTag(m[TagName]); k != "" {
		return k
	}
	return parseKey(m[CustomArg])
}
