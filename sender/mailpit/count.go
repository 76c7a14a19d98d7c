package mailpit

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender"
	"github.com/weeklydigest/digest/sender/internal/httpapi"
)

// Count returns how many messages Mailpit holds tagged with key's tag
// (sender.MailpitTag), in one API call: the search's messages_count. Unlike
// Lookup it does not read each message's X-Digest-Key: the tag holds the
// key's whole HMAC, which no other digest's tag shares. Every search reply
// also carries every tag of the mailbox, so a week's worth of Counts costs
// the square of the week: "digest verify" counts from ListKeys instead
// (verify.Config.CountByListing).
func (l *Lookup) Count(ctx context.Context, key digest.Key) (int, error) {
	var res struct {
		MessagesCount *int `json:"messages_count"`
	}
	q := url.Values{"query": {"tag:" + sender.MailpitTag(key)}, "limit": {"1"}}
	if err := l.api.GetJSON(ctx, l.base+"/api/v1/search?"+q.Encode(), &res); err != nil {
		return 0, err
	}
	if res.MessagesCount == nil {
		return 0, httpapi.Temporary(fmt.Errorf("%s: search reply has no messages_count", l.api.Op))
	}
	return *res.MessagesCount, nil
}

// mailpitPage is how many messages one listing call returns.
const mailpitPage = 1000

// maxListBody bounds one listing reply. Every Mailpit list and search
// reply carries every tag of the mailbox ("tags"): about 70 bytes a
// tagged message, 7 MB at 100,000 messages, so this holds some 3 million.
const maxListBody = 256 << 20

// ListKeys lists every message Mailpit holds, mailpitPage at a time, and
// hands fn the digest keys of their tags ("dk-KID-HEX"; the key id in lower
// case, as the tag has it). Mailpit lists newest first by offset: messages
// that arrive meanwhile push the end of one page onto the start of the
// next, where they are recognised by their IDs and skipped; a message
// deleted meanwhile may be missed.
func (l *Lookup) ListKeys(ctx context.Context, fn func([]digest.Key) error) error {
	prev := map[string]bool{} // the IDs of the previous page
	for start := 0; ; start += mailpitPage {
		var res struct {
			Messages []struct {
				ID   string   `json:"ID"`
				Tags []string `json:"Tags"`
			} `json:"messages"`
		}
		q := url.Values{"start": {strconv.Itoa(start)}, "limit": {strconv.Itoa(mailpitPage)}}
		if err := l.api.GetJSONUpTo(ctx, l.base+"/api/v1/messages?"+q.Encode(), &res, maxListBody); err != nil {
			return err
		}
		var keys []digest.Key
		ids := make(map[string]bool, len(res.Messages))
		for _, m := range res.Messages {
			ids[m.ID] = true
			if prev[m.ID] {
				continue
			}
			for _, tag := range m.Tags {
				if k, ok := keyOfTag(tag); ok {
					keys = append(keys, k)
				}
			}
		}
		prev = ids
		if len(keys) > 0 {
			if err := fn(keys); err != nil {
				return err
			}
		}
		if len(res.Messages) < mailpitPage {
			return nil
		}
	}
}

// keyOfTag reads the key of a sender.MailpitTag tag, its key id in lower case.
func keyOfTag(tag string) (digest.Key, bool) {
	rest, ok := strings.CutPrefix(tag, "dk-")
	i := strings.LastIndexByte(rest, '-')
	if !ok || i < 0 {
		return "", false
	}
	k, err := digest.ParseKey(rest[:i] + ":" + rest[i+1:])
	return k, err == nil
}
