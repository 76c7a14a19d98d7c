package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/weeklydigest/digest/digest"
)

// ErrMailerUnusable is wrapped when the mailer failed in a way no retry can
// fix (digest.SendFatal: TLS required but not offered, authentication
// refused, unknown host, invalid certificate). It wraps ErrConfig: the
// command exits 2. Found by Config.Preflight, nothing was claimed; found
// by a send, the run stops and gives its unsent claims back.
var ErrMailerUnusable = fmt.Errorf("%w: the mail server cannot be used as configured", ErrConfig)

// ErrMailerUnreachable is wrapped when the mail server could not be
// reached: by Config.Preflight (nothing claimed), or by the circuit rule
// during a run (see circuitThreshold). The run stops with its digests
// pending; the next run continues (the command exits 3).
var ErrMailerUnreachable = errors.New("mail server unreachable")

// circuitThreshold is how many sends in a row (no send succeeding or
// failing otherwise in between) may fail to connect before the run stops:
// twice the concurrency, at least 8. A server that is down fails every
// connect; a flaky one lets some through and resets the count. A pass in
// which every send failed to connect, twice in a row, stops the run too
// (a week smaller than the threshold).
func circuitThreshold(cfg *Config) int64 { return int64(max(8, 2*cfg.Concurrency)) }

// deadPassesToStop is how many passes in a row in which every send failed
// to connect stop the run.
const deadPassesToStop = 2

// connectStreak counts, within a pass, the sends that failed to connect
// since the last one that did not, and whether any send did not.
type connectStreak struct {
	run      atomic.Int64 // connect failures in a row
	tried    atomic.Int64 // sends attempted in the pass
	connects atomic.Int64 // of which failed to connect
}

// note records one send's result and reports whether the circuit is open.
func (c *connectStreak) note(err error, threshold int64) (open bool) {
	c.tried.Add(1)
	if err == nil || digest.SendClassOf(err) != digest.SendTemporary || digest.KindOf(err) != digest.KindConnect {
		c.run.Store(0)
		return false
	}
	c.connects.Add(1)
	return c.run.Add(1) >= threshold
}

// dead reports whether every send of the pass failed to connect.
func (c *connectStreak) dead() bool {
	n := c.tried.Load()
	return n > 0 && c.connects.Load() == n
}

// failureKinds counts failed sends by kind ("temporary: connect",
// "permanent: sending SMTP RCPT TO command: reply 550", …) and logs the
// first of each kind at warn with its cause: a week against a broken server
// makes a few lines, not one per digest.
type failureKinds struct {
	mu sync.Mutex
	n  map[string]int
}

// failureKind names err's kind: its class, and the mailer's Kind if any.
func failureKind(err error) string {
	kind := digest.SendClassOf(err).String()
	if k := digest.KindOf(err); k != "" {
		kind += ": " + k
	}
	return kind
}

// note counts err and reports whether it is the first of its kind.
func (f *failureKinds) note(kind string) (first bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[string]int{}
	}
	f.n[kind]++
	return f.n[kind] == 1
}

func (f *failureKinds) snapshot() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.n) == 0 {
		return nil
	}
	return maps.Clone(f.n)
}

// noteFailure counts a failed send and logs it, with the digest's key, the
// recipient's address key and the cause (the address redacted). A
// permanent failure is logged every time: each is a customer whose address
// bounces, which the runbook turns into a suppression by its address key,
// and they are few (a server refusing everyone fails at the preflight or
// as fatal instead). Other kinds are logged the first time only: a week
// against a broken server makes a few lines, not one per digest.
func (p *pass) noteFailure(ctx context.Context, it *item, err error) {
	r := p.runner
	kind := failureKind(err)
	first := r.failures.note(kind)
	attrs := []any{slog.String("kind", kind), slog.String("key", string(it.claim.Key)),
		slog.String("address_key", r.Keyring.AddressKey(it.msg.To.Email)),
		slog.String("err", digest.RedactAddress(err.Error(), it.msg.To.Email))}
	switch {
	case digest.SendClassOf(err) == digest.SendPermanent:
		r.Config.Logger.WarnContext(ctx, "send failed permanently; not retried (a bounce: see the runbook's suppression)", attrs...)
	case first:
		r.Config.Logger.WarnContext(ctx, "send failed; later failures of this kind are only counted (summary: failures)", attrs...)
	}
}
