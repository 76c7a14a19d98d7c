// Package lookup asks mail providers whether they hold the message of a
// digest key (digest.Lookup): Mailpit by its tag, Postmark by its metadata,
// and any provider that posts events to "digest serve" by the events the
// ledger recorded (Events).
// A run asks when a send's outcome is unknown (ambiguous), instead of
// guessing. API errors are classified like sends (temporary with a
// Retry-After time, or permanent), and never carry a token or password.
package lookup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/smtp"
)

// ErrURL is wrapped by ParseURL's errors.
var ErrURL = errors.New("invalid lookup URL")

// Config is what ParseURL needs besides the URL.
type Config struct {
	// PostmarkToken is the Postmark server token (DIGEST_POSTMARK_TOKEN, or
	// the content of DIGEST_POSTMARK_TOKEN_FILE). Required for postmark+.
	PostmarkToken string
	// HTTPClient makes the API calls. Default: a client with a 30 s timeout.
	HTTPClient *http.Client
	// Now is the clock for Retry-After dates. Default time.Now.
	Now func() time.Time
	// Events is the ledger the events look-up reads; nil: bind it later
	// (Events.Bind).
	Events EventLedger
	// EventsLag is the events look-up's lag (DIGEST_EVENTS_LAG); 0:
	// DefaultEventsLag.
	EventsLag time.Duration
}

// ParseURL returns the provider look-up a URL names:
//
//	""                           no look-up (nil, nil): the runner's ambiguous policy applies
//	mailpit+http://host:8025     Mailpit's API (also mailpit+https; user:pass@ for its basic auth)
//	postmark+https://host        Postmark's API (https://api.postmarkapp.com), token from cfg
//	events:PROVIDER              the provider's webhook events in the ledger (Events)
//
// Errors never contain a password or token.
func ParseURL(raw string, cfg Config) (digest.Lookup, error) {
	if raw == "" {
		return nil, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed URL", ErrURL)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if u.Scheme == EventsScheme {
		if !providerName(u.Opaque) {
			return nil, fmt.Errorf("%w: want events:PROVIDER, the name digest serve takes its webhooks under (events:ses)", ErrURL)
		}
		return NewEvents(u.Opaque, cfg.Events, cfg.EventsLag), nil
	}
	provider, scheme, _ := strings.Cut(u.Scheme, "+")
	if u.Host == "" || u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: want %s://host[:port]", ErrURL, smtp.Clip(u.Scheme))
	}
	base := url.URL{Scheme: scheme, Host: u.Host, Path: strings.TrimSuffix(u.Path, "/")}
	switch {
	case provider == "mailpit" && (scheme == "http" || scheme == "https"):
		api := &apiClient{op: "mailpit lookup", client: cfg.HTTPClient, now: cfg.Now, header: http.Header{}}
		if u.User != nil {
			pass, _ := u.User.Password()
			req := http.Request{Header: http.Header{}}
			req.SetBasicAuth(u.User.Username(), pass)
			api.header = req.Header
		}
		return &Mailpit{base: base.String(), api: api}, nil
	case provider == "postmark" && scheme == "https":
		if u.User != nil {
			return nil, fmt.Errorf("%w: put the Postmark token in DIGEST_POSTMARK_TOKEN(_FILE), not the URL", ErrURL)
		}
		if cfg.PostmarkToken == "" {
			return nil, fmt.Errorf("%w: postmark look-up needs a server token (DIGEST_POSTMARK_TOKEN or DIGEST_POSTMARK_TOKEN_FILE)", ErrURL)
		}
		return NewPostmark(base.String(), cfg.PostmarkToken, cfg.HTTPClient, cfg.Now), nil
	}
	return nil, fmt.Errorf("%w: scheme %q, want mailpit+http, mailpit+https, postmark+https or events", ErrURL, smtp.Clip(u.Scheme))
}

// providerName reports whether s can name a webhook provider: 1 to 32
// lowercase letters, digits, '-' or '_'.
func providerName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Mailpit finds messages in Mailpit by the tag smtp.MailpitTag(key), set
// through the X-Tags header, and confirms the exact key in the X-Digest-Key
// header of each hit. The reference is Mailpit's message ID.
type Mailpit struct {
	base string
	api  *apiClient
}

var _ digest.Lookup = (*Mailpit)(nil)

// NewMailpit returns a look-up against Mailpit's API at base, e.g.
// http://127.0.0.1:8025.
func NewMailpit(base string, client *http.Client) *Mailpit {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	return &Mailpit{
		base: strings.TrimSuffix(base, "/"),
		api:  &apiClient{op: "mailpit lookup", client: client, now: time.Now},
	}
}

// Lookup implements digest.Lookup.
func (l *Mailpit) Lookup(ctx context.Context, key digest.Key) (string, bool, error) {
	var res struct {
		Messages []struct {
			ID string `json:"ID"`
		} `json:"messages"`
	}
	q := url.Values{"query": {"tag:" + smtp.MailpitTag(key)}, "limit": {"20"}}
	if err := l.api.getJSON(ctx, l.base+"/api/v1/search?"+q.Encode(), &res); err != nil {
		return "", false, err
	}
	for _, m := range res.Messages {
		var headers map[string][]string
		if err := l.api.getJSON(ctx, l.base+"/api/v1/message/"+url.PathEscape(m.ID)+"/headers", &headers); err != nil {
			return "", false, err
		}
		for _, v := range headers[smtp.HeaderKey] {
			if strings.TrimSpace(v) == string(key) {
				return m.ID, true, nil
			}
		}
	}
	return "", false, nil
}

// Postmark asks Postmark's outbound message search for the message
// whose metadata "digest-key" is the key (sent as X-PM-Metadata-digest-key).
// The reference is Postmark's MessageID. Postmark lists a message once it
// has processed it, so a message accepted seconds ago may not be found yet.
type Postmark struct {
	base string
	api  *apiClient
}

var _ digest.Lookup = (*Postmark)(nil)

// NewPostmark returns a look-up against Postmark's API at base
// (https://api.postmarkapp.com) with a server token. client and now may be
// nil for the defaults.
func NewPostmark(base, token string, client *http.Client, now func() time.Time) *Postmark {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	if now == nil {
		now = time.Now
	}
	return &Postmark{
		base: strings.TrimSuffix(base, "/"),
		api: &apiClient{op: "postmark lookup", client: client, now: now,
			header: http.Header{"X-Postmark-Server-Token": {token}}},
	}
}

// Lookup implements digest.Lookup.
func (l *Postmark) Lookup(ctx context.Context, key digest.Key) (string, bool, error) {
	var res struct {
		TotalCount int
		Messages   []struct {
			MessageID string
			Metadata  map[string]string
		}
	}
	q := url.Values{"count": {"1"}, "offset": {"0"}, "metadata_digest-key": {string(key)}}
	if err := l.api.getJSON(ctx, l.base+"/messages/outbound?"+q.Encode(), &res); err != nil {
		return "", false, err
	}
	for _, m := range res.Messages {
		if v, ok := m.Metadata["digest-key"]; ok && v != string(key) {
			return "", false, fmt.Errorf("postmark lookup: search for %s returned a message with digest-key %q", key, smtp.Clip(v))
		}
		if m.MessageID != "" {
			return m.MessageID, true, nil
		}
	}
	if res.TotalCount > 0 {
		return "", false, fmt.Errorf("postmark lookup: TotalCount %s but no message listed", strconv.Itoa(res.TotalCount))
	}
	return "", false, nil
}
