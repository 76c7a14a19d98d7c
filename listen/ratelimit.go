package listen

import (
	"net"
	"net/http"
	"strings"
	"sync"

	"golang.org/x/time/rate"
)

// maxClients bounds the limiters held: past it they start again, so a
// flood of distinct addresses costs bounded memory (and, at worst, resets
// everyone's budget once per maxClients new clients).
const maxClients = 10_000

// clientLimits is one token bucket per client address.
type clientLimits struct {
	rate  rate.Limit
	burst int

	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func newClientLimits(perSecond float64, burst int) *clientLimits {
	return &clientLimits{rate: rate.Limit(perSecond), burst: burst, m: map[string]*rate.Limiter{}}
}

// allow takes one token of client's bucket.
func (c *clientLimits) allow(client string) bool {
	c.mu.Lock()
	l, ok := c.m[client]
	if !ok {
		if len(c.m) >= maxClients {
			clear(c.m)
		}
		l = rate.NewLimiter(c.rate, c.burst)
		c.m[client] = l
	}
	c.mu.Unlock()
	return l.Allow()
}

// clientOf names the client of r: the value of header (the last entry of
// X-Forwarded-For, which the trusted proxy appended) when set and
// present, else the connection's peer address without its port.
func clientOf(r *http.Request, header string) string {
	if header != "" {
		if v := r.Header.Values(header); len(v) > 0 {
			last := v[len(v)-1]
			if i := strings.LastIndexByte(last, ','); i >= 0 {
				last = last[i+1:]
			}
			if last = strings.TrimSpace(last); last != "" {
				return last
			}
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
