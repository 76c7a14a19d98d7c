package run

import (
	"math/rand/v2"
	"time"
)

// Backoff computes the delay before retry n (1 for the first retry): Base
// doubled for each retry after the first, capped at Max, then jittered:
// the delay is drawn uniformly between half that value and all of it
// ("equal jitter"), so a fleet of failed sends does not retry in lock step
// and no retry comes sooner than half the backoff.
type Backoff struct {
	Base time.Duration // default 30s
	Max  time.Duration // default 1h
}

// Delay returns the jittered delay before retry n: between half of
// min(Base·2^(n-1), Max) and all of it.
func (b Backoff) Delay(n int) time.Duration {
	base, ceiling := b.Base, b.Max
	if base <= 0 {
		base = 30 * time.Second
	}
	if ceiling <= 0 {
		ceiling = time.Hour
	}
	d := base
	for i := 1; i < n && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
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
