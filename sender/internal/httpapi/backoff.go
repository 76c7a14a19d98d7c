// Package httpapi is the plumbing the look-ups of providers' HTTP APIs
// (sender/mailpit, sender/postmark) share: a GET of JSON with the
// provider's credentials, and its failures classified like sends
// (HTTPError: temporary with a Retry-After time, or permanent).
package httpapi

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Backoff bounds for retries without a server-given time.
const (
	BackoffBase = time.Second
	BackoffCap  = 15 * time.Minute
)

// Backoff returns how long to wait before retry number attempt (1 for the
// first retry): exponential from BackoffBase, capped at BackoffCap, with
// "equal jitter" (a uniform pick in [d/2, d]) so that many workers that
// failed together do not retry together.
func Backoff(attempt int) time.Duration {
	return backoff(attempt, rand.Int64N)
}

func backoff(attempt int, randN func(int64) int64) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := BackoffCap
	if attempt < 32 {
		if e := BackoffBase << (attempt - 1); e > 0 && e < BackoffCap {
			d = e
		}
	}
	half := int64(d / 2)
	return time.Duration(half + randN(half+1))
}

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
