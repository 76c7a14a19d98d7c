// Package postmark is the look-up of Postmark (https://postmarkapp.com):
// its outbound message search finds a digest's message by the metadata
// "digest-key" the X-PM-Metadata-digest-key header set, and counts them
// for "digest verify".
package postmark

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender"
	"github.com/weeklydigest/digest/sender/internal/httpapi"
)

// Lookup asks Postmark's outbound message search for the message
// whose metadata "digest-key" is the key (sent as X-PM-Metadata-digest-key).
// The reference is Postmark's MessageID. Postmark lists a message once it
// has processed it, so a message accepted seconds ago may not be found yet.
type Lookup struct {
	base string
	api  *httpapi.Client
}

var _ digest.Lookup = (*Lookup)(nil)

// New returns a look-up against Postmark's API at base
// (https://api.postmarkapp.com) with a server token. client and now may be
// nil for the defaults.
func New(base, token string, client *http.Client, now func() time.Time) *Lookup {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	if now == nil {
		now = time.Now
	}
	return &Lookup{
		base: strings.TrimSuffix(base, "/"),
		api: &httpapi.Client{Op: "postmark lookup", HTTP: client, Now: now,
			Header: http.Header{"X-Postmark-Server-Token": {token}}},
	}
}

// Lookup implements digest.Lookup.
func (l *Lookup) Lookup(ctx context.Context, key digest.Key) (string, bool, error) {
	var res struct {
		TotalCount int
		Messages   []struct {
			MessageID string
			Metadata  map[string]string
		}
	}
	q := url.Values{"count": {"1"}, "offset": {"0"}, "metadata_digest-key": {string(key)}}
	if err := l.api.GetJSON(ctx, l.base+"/messages/outbound?"+q.Encode(), &res); err != nil {
		return "", false, err
	}
	for _, m := range res.Messages {
		if v, ok := m.Metadata["digest-key"]; ok && v != string(key) {
			return "", false, fmt.Errorf("postmark lookup: search for %s returned a message with digest-key %q", key, sender.Clip(v))
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
