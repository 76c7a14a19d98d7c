package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SESConfig configures the Amazon SES provider.
type SESConfig struct {
	// Topics are the ARNs of the SNS topics SES publishes to; a message
	// from any other topic is refused (ErrSignature). Required.
	Topics []string
	// Certificates, when set, are the PEM signing certificates to trust,
	// and SigningCertURL is ignored. Empty: the certificate is fetched
	// from the message's SigningCertURL, only over https from
	// sns.<region>.amazonaws.com(.cn), and kept.
	Certificates []byte
	// Client fetches certificates and confirms subscriptions;
	// http.DefaultClient when nil.
	Client *http.Client
	// Tolerance bounds the age of a message's Timestamp; DefaultTolerance
	// when zero. SNS keeps a message's Timestamp on its retries: a
	// delivery policy that retries for longer than this needs more.
	Tolerance time.Duration
}

// SES reads Amazon SES notifications and event publishing through an
// Amazon SNS topic subscribed over HTTPS.
type SES struct {
	topics    map[string]bool
	certs     *snsCerts
	tolerance time.Duration
}

// NewSES returns the SES provider.
func NewSES(c SESConfig) (*SES, error) {
	if len(c.Topics) == 0 {
		return nil, errors.New("ses: no SNS topic ARN allowed")
	}
	s := &SES{topics: map[string]bool{}, certs: &snsCerts{client: c.Client}, tolerance: c.Tolerance}
	for _, t := range c.Topics {
		if !strings.HasPrefix(t, "arn:aws") || strings.Count(t, ":") != 5 {
			return nil, errors.New("ses: an SNS topic is not an ARN (arn:aws:sns:region:account:name)")
		}
		s.topics[t] = true
	}
	if len(c.Certificates) > 0 {
		certs, err := parseCertificates(c.Certificates)
		if err != nil {
			return nil, fmt.Errorf("ses certificate: %w", err)
		}
		s.certs.pinned = certs
	}
	if s.certs.client == nil {
		s.certs.client = http.DefaultClient
	}
	s.tolerance = orDefault(s.tolerance)
	return s, nil
}

// Name returns "ses".
func (*SES) Name() string { return "ses" }

// Parse verifies the SNS envelope (topic, age, signature) and reads the
// SES message inside, or returns the Confirm of a subscription.
func (s *SES) Parse(ctx context.Context, header http.Header, body []byte, now time.Time) (Batch, error) {
	// SNS posts text/plain; a raw-delivery subscription is not supported.
	var m snsMessage
	if err := readJSON(header, body, &m, "SNS message", "text/plain"); err != nil {
		return Batch{}, err
	}
	if !s.topics[m.TopicArn] {
		return Batch{}, fmt.Errorf("%w: SNS topic not allowed", ErrSignature)
	}
	sent, err := time.Parse(time.RFC3339Nano, m.Timestamp)
	if err != nil {
		return Batch{}, fmt.Errorf("%w: SNS Timestamp is not RFC 3339", ErrSignature)
	}
	if err := checkAge(sent, now, s.tolerance); err != nil {
		return Batch{}, err
	}
	if err := s.certs.verify(ctx, &m, now); err != nil {
		return Batch{}, err
	}
	switch m.Type {
	case "SubscriptionConfirmation":
		confirm, err := s.certs.confirm(&m)
		if err != nil {
			return Batch{}, err
		}
		return Batch{Confirm: confirm}, nil
	case "UnsubscribeConfirmation":
		return Batch{}, nil
	}
	events, err := sesEvents(m.Message, sent)
	if err != nil {
		return Batch{}, err
	}
	for i := range events {
		events[i].Provider = s.Name()
	}
	return Batch{Events: events}, nil
}

// sesMessage is an SES notification (notificationType) or a published
// event (eventType): https://docs.aws.amazon.com/ses/latest/dg/notification-contents.html
// and https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-sns-contents.html.
type sesMessage struct {
	NotificationType string `json:"notificationType"`
	EventType        string `json:"eventType"`
	Mail             struct {
		Timestamp   string              `json:"timestamp"`
		MessageID   string              `json:"messageId"`
		Destination []string            `json:"destination"`
		Headers     []nameValue         `json:"headers"`
		Tags        map[string][]string `json:"tags"`
	} `json:"mail"`
	Bounce *struct {
		BounceType        string `json:"bounceType"`
		BounceSubType     string `json:"bounceSubType"`
		BouncedRecipients []struct {
			EmailAddress string `json:"emailAddress"`
			Status       string `json:"status"`
		} `json:"bouncedRecipients"`
		Timestamp  string `json:"timestamp"`
		FeedbackID string `json:"feedbackId"`
	} `json:"bounce"`
	Complaint *struct {
		ComplainedRecipients []struct {
			EmailAddress string `json:"emailAddress"`
		} `json:"complainedRecipients"`
		ComplaintFeedbackType string `json:"complaintFeedbackType"`
		Timestamp             string `json:"timestamp"`
		FeedbackID            string `json:"feedbackId"`
	} `json:"complaint"`
	Delivery *struct {
		Timestamp  string   `json:"timestamp"`
		Recipients []string `json:"recipients"`
	} `json:"delivery"`
}

// sesEvents reads the SES message: one Event per recipient.
func sesEvents(message string, fallback time.Time) ([]Event, error) {
	var m sesMessage
	if err := decodeJSON([]byte(message), &m, "SES message"); err != nil {
		return nil, err
	}
	typ := m.EventType
	if typ == "" {
		typ = m.NotificationType
	}
	key := parseKey(header(m.Mail.Headers, HeaderKey))
	if key == "" {
		for _, v := range m.Mail.Tags[TagName] {
			if key = KeyFromTag(v); key != "" {
				break
			}
		}
	}
	mailAt, err := parseTime(m.Mail.Timestamp, fallback)
	if err != nil {
		return nil, err
	}
	var events []Event
	// An event's ID: SES's feedback id, or the message id with the event
	// type, and the recipient's place in the list.
	add := func(id string, kind Kind, addr string, at time.Time, d string) {
		if strings.HasSuffix(id, ":") {
			id = derivedID(id, m.Mail.MessageID, at.String())
		}
		events = append(events, Event{ID: id + ":" + strconv.Itoa(len(events)), Kind: kind, Key: key, Address: addr, At: at, Detail: d})
	}
	switch {
	case typ == "Bounce" && m.Bounce != nil:
		at, err := parseTime(m.Bounce.Timestamp, mailAt)
		if err != nil {
			return nil, err
		}
		kind := KindSoftBounce // Transient, Undetermined
		if m.Bounce.BounceType == "Permanent" {
			kind = KindHardBounce
		}
		for _, r := range m.Bounce.BouncedRecipients {
			add("bounce:"+m.Bounce.FeedbackID, kind, r.EmailAddress, at, detail(m.Bounce.BounceType, m.Bounce.BounceSubType, r.Status))
		}
	case typ == "Complaint" && m.Complaint != nil:
		at, err := parseTime(m.Complaint.Timestamp, mailAt)
		if err != nil {
			return nil, err
		}
		for _, r := range m.Complaint.ComplainedRecipients {
			add("complaint:"+m.Complaint.FeedbackID, KindComplaint, r.EmailAddress, at, detail(m.Complaint.ComplaintFeedbackType))
		}
	case typ == "Delivery" && m.Delivery != nil:
		at, err := parseTime(m.Delivery.Timestamp, mailAt)
		if err != nil {
			return nil, err
		}
		for _, r := range m.Delivery.Recipients {
			add("delivery:"+m.Mail.MessageID, KindDelivered, r, at, "")
		}
	case typ == "Send":
		for _, r := range m.Mail.Destination {
			add("send:"+m.Mail.MessageID, KindAccepted, r, mailAt, "")
		}
	case typ == "":
		return nil, fmt.Errorf("%w: SES message has no eventType or notificationType", ErrPayload)
	default:
		// Reject, Open, Click, Rendering Failure, DeliveryDelay,
		// Subscription, and a Bounce without its bounce object.
		add(strings.ToLower(safeText(typ, 32))+":"+m.Mail.MessageID, KindOther, "", mailAt, detail(typ))
	}
	return events, nil
}
