// Package mailpit is the look-up of Mailpit (https://mailpit.axllent.org),
// the SMTP server the tests, the demo and a staging setup deliver to: its
// HTTP API finds a digest's message by the tag sender.MailpitTag(key),
// set through the X-Tags header, and counts and lists the week's messages
// for "digest verify".
package mailpit

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender"
	"github.com/weeklydigest/digest/sender/internal/httpapi"
)

// Lookup finds messages in Mailpit by the tag sender.MailpitTag(key), set
// through the X-Tags header, and confirms the exact key in the X-Digest-Key
// header of each hit. The reference is Mailpit's message ID.
type Lookup struct {
	base string
	api  *httpapi.Client
}

var _ digest.Lookup = (*Lookup)(nil)

// Config says where Mailpit's API is and how to ask it.
type Config struct {
	// Base is the API's URL, e.g. http://127.0.0.1:8025. Required.
	Base string
	// HTTPClient makes the API calls. Default: a client with a 30 s timeout.
	HTTPClient *http.Client
	// Now is the clock for Retry-After dates. Default time.Now.
	Now func() time.Time
	// BasicAuth, when set, is sent as HTTP basic auth (Mailpit's
	// --ui-auth): the user:pass@ of DIGEST_LOOKUP_URL.
	BasicAuth *url.Userinfo
}

// New returns a look-up against Mailpit's API as cfg says.
func New(cfg Config) *Lookup {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	api := &httpapi.Client{Op: "mailpit lookup", HTTP: cfg.HTTPClient, Now: cfg.Now, Header: http.Header{}}
	if cfg.BasicAuth != nil {
		pass, _ := cfg.BasicAuth.Password()
		req := http.Request{Header: http.Header{}}
		req.SetBasicAuth(cfg.BasicAuth.Username(), pass)
		api.Header = req.Header
	}
	return &Lookup{base: strings.TrimSuffix(cfg.Base, "/"), api: api}
}

// Lookup implements digest.Lookup.
func (l *Lookup) Lookup(ctx context.Context, key digest.Key) (string, bool, error) {
	var res struct {
		Messages []struct {
			ID string `json:"ID"`
		} `json:"messages"`
	}
	q := url.Values{"query": {"tag:" + sender.MailpitTag(key)}, "limit": {"20"}}
	if err := l.api.GetJSON(ctx, l.base+"/api/v1/search?"+q.Encode(), &res); err != nil {
		return "", false, err
	}
	for _, m := range res.Messages {
		var headers map[string][]string
		if err := l.api.GetJSON(ctx, l.base+"/api/v1/message/"+url.PathEscape(m.ID)+"/headers", &headers); err != nil {
			return "", false, err
		}
		for _, v := range headers[sender.HeaderKey] {
			if strings.TrimSpace(v) == string(key) {
				return m.ID, true, nil
			}
		}
	}
	return "", false, nil
}
