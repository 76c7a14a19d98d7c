// Package httpapi is the plumbing the look-ups of providers' HTTP APIs
// (sender/mailpit, sender/postmark) share: a GET of JSON with the
// provider's credentials, and its failures classified like sends
// (HTTPError: temporary with a Retry-After time, or permanent).
package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryAfter parses a Retry-After header value, either delay-seconds or an
// HTTP date, into an absolute time. ok is false when the value is missing
// or unparseable; a date in the past yields now.
func RetryAfter(value string, now time.Time) (at time.Time, ok bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return time.Time{}, false
	}
	if secs, err := strconv.ParseInt(value, 10, 64); err == nil {
		if secs < 0 {
			return time.Time{}, false
		}
		if secs > int64(24*time.Hour/time.Second) {
			secs = int64(24 * time.Hour / time.Second)
		}
		return now.Add(time.Duration(secs) * time.Second), true
	}
	t, err := http.ParseTime(value)
	if err != nil {
		return time.Time{}, false
	}
	if t.Before(now) {
		return now, true
	}
	return t, true
}
