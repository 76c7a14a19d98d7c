package postmark

import (
	"context"
	"fmt"
	"net/url"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender"
	"github.com/weeklydigest/digest/sender/internal/httpapi"
)

// Count returns how many outbound messages Postmark lists with metadata
// digest-key = key: the search's TotalCount, in one API call.
func (l *Lookup) Count(ctx context.Context, key digest.Key) (int, error) {
	var res struct {
		TotalCount *int
		Messages   []struct {
			Metadata map[string]string
		}
	}
	q := url.Values{"count": {"1"}, "offset": {"0"}, "metadata_digest-key": {string(key)}}
	if err := l.api.GetJSON(ctx, l.base+"/messages/outbound?"+q.Encode(), &res); err != nil {
		return 0, err
	}
	for _, m := range res.Messages {
		if v, ok := m.Metadata["digest-key"]; ok && v != string(key) {
			return 0, fmt.Errorf("postmark lookup: search for %s returned a message with digest-key %q", key, sender.Clip(v))
		}
	}
	if res.TotalCount == nil {
		return 0, httpapi.Temporary(fmt.Errorf("postmark lookup: search reply has no TotalCount"))
	}
	return *res.TotalCount, nil
}
