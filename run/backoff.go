package run

import (
	"math/rand/v2"
	"time"
)

// Backoff computes the delay before retry n (1 for the first retry):
// exponential from Base, capped at Max, with "full jitter" over the upper
// half so that a fleet of failed sends does not retry in lock step.
type Backoff struct {
	Base time.Duration // default 30s
	Max  time.Duration // default 1h
}

// Delay returns the delay before attempt n.
func (b Backoff) Delay(n int) time.Duration {
	base, max := b.Base, b.Max
	if base <= 0 {
		base = 30 * time.Second
	}
	if max <= 0 {
		max = time.Hour
	}
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	half := d / 2
	return half + rand.N(half+1)
}

// RetryAt returns when a failed attempt n may be retried: the provider's
// requested time when it gave one and it is later than the backoff, else now
// plus the backoff.
func (b Backoff) RetryAt(now time.Time, n int, requested time.Time) time.Time {
	at := now.Add(b.Delay(n))
	if requested.After(at) {
		return requested
	}
	return at
}
