// Package lookupurl only wires: it picks, from DIGEST_LOOKUP_URL, the
// look-up that asks whether a provider holds the message of a digest key
// (digest.Lookup): Mailpit by its tag (sender/mailpit), Postmark by its
// metadata (sender/postmark), and any provider that posts events to
// "digest serve" by the events the ledger recorded (sender/events).
// A run asks when a send's outcome is unknown (ambiguous), instead of
// guessing. API errors are classified like sends (temporary with a
// Retry-After time, or permanent), and never carry a token or password.
package lookupurl

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender"
	"github.com/weeklydigest/digest/sender/events"
	"github.com/weeklydigest/digest/sender/mailpit"
	"github.com/weeklydigest/digest/sender/postmark"
)

// ErrURL is wrapped by Parse's errors.
var ErrURL = errors.New("invalid lookup URL")

// Config is what Parse needs besides the URL.
type Config struct {
	// PostmarkToken is the Postmark server token (DIGEST_POSTMARK_TOKEN, or
	// the content of DIGEST_POSTMARK_TOKEN_FILE). Required for postmark+.
	PostmarkToken string
	// HTTPClient makes the API calls. Default: a client with a 30 s timeout.
	HTTPClient *http.Client
	// Now is the clock for Retry-After dates. Default time.Now.
	Now func() time.Time
	// Events is the ledger the events look-up reads; nil: bind it later
	// (events.Lookup.Bind).
	Events events.Ledger
	// EventsLag is the events look-up's lag (DIGEST_EVENTS_LAG); 0:
	// events.DefaultLag.
	EventsLag time.Duration
}

// Parse returns the provider look-up a URL names:
//
//	""                           no look-up (nil, nil): the runner's ambiguous policy applies
//	mailpit+http://host:8025     Mailpit's API (also mailpit+https; user:pass@ for its basic auth)
//	postmark+https://host        Postmark's API (https://api.postmarkapp.com), token from cfg
//	events:PROVIDER              the provider's webhook events in the ledger (sender/events)
//
// Errors never contain a password or token.
func Parse(raw string, cfg Config) (digest.Lookup, error) {
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
	if u.Scheme == events.Scheme {
		if !providerName(u.Opaque) {
			return nil, fmt.Errorf("%w: want events:PROVIDER, the name digest serve takes its webhooks under (events:ses)", ErrURL)
		}
		return events.New(u.Opaque, cfg.Events, cfg.EventsLag), nil
	}
	provider, scheme, _ := strings.Cut(u.Scheme, "+")
	if u.Host == "" || u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: want %s://host[:port]", ErrURL, sender.Clip(u.Scheme))
	}
	base := url.URL{Scheme: scheme, Host: u.Host, Path: strings.TrimSuffix(u.Path, "/")}
	switch {
	case provider == "mailpit" && (scheme == "http" || scheme == "https"):
		return mailpit.New(mailpit.Config{Base: base.String(), HTTPClient: cfg.HTTPClient, Now: cfg.Now, BasicAuth: u.User}), nil
	case provider == "postmark" && scheme == "https":
		if u.User != nil {
			return nil, fmt.Errorf("%w: put the Postmark token in DIGEST_POSTMARK_TOKEN(_FILE), not the URL", ErrURL)
		}
		if cfg.PostmarkToken == "" {
			return nil, fmt.Errorf("%w: postmark look-up needs a server token (DIGEST_POSTMARK_TOKEN or DIGEST_POSTMARK_TOKEN_FILE)", ErrURL)
		}
		return postmark.New(base.String(), cfg.PostmarkToken, cfg.HTTPClient, cfg.Now), nil
	}
	return nil, fmt.Errorf("%w: scheme %q, want mailpit+http, mailpit+https, postmark+https or events", ErrURL, sender.Clip(u.Scheme))
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
