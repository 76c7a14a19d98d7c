// Package events is the look-up that answers from the ledger: the events
// providers posted to "digest serve" (ledger.ProviderEvents), for a
// provider with no search API. It reads no external system itself, yet it
// is a look-up like sender/mailpit and sender/postmark, chosen by
// DIGEST_LOOKUP_URL (events:PROVIDER), so it sits beside them.
package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/sender"
)

// Scheme is DIGEST_LOOKUP_URL's scheme of the events look-up:
// events:PROVIDER, PROVIDER the name "digest serve" takes the provider's
// webhooks under (events:ses, events:sendgrid...).
const Scheme = "events"

// DefaultLag is the look-up's lag by default (DIGEST_EVENTS_LAG): longer
// than the providers retry a webhook the intake did not take (Postmark
// about 10 hours, Mailgun 8, SendGrid 24, Svix about 27 with its last
// attempts), so an event still on its way is not taken for one that
// never comes.
const DefaultLag = 30 * time.Hour

// ClockMargin is how far past a send's time the watermark must be for
// "not found": room for the provider's clock (which dates the events)
// running behind the ledger's (which dates the send).
const ClockMargin = 5 * time.Minute

// ErrNotComplete is wrapped by the events look-up's error when no
// event of the key is stored and the provider's events are not known to be
// complete past the send: the provider may yet report it. The run keeps
// the digest maybe-sent and asks again later; it never resends on it.
var ErrNotComplete = errors.New("no provider event for the key yet, and the provider's events are not known complete past its send")

// Ledger is what the events look-up reads: the ledger's provider
// events (ledger.ProviderEvents).
type Ledger interface {
	EventEvidence(ctx context.Context, provider string, key digest.Key) (ledger.Evidence, error)
}

// Lookup answers from the provider events "digest serve" recorded from
// the provider's webhooks (ledger.ProviderEvents): for a provider with no
// search API (Amazon SES, SendGrid, a relay that posts events) that sends
// an event for every message it takes. A key is found when any event of
// the provider names it (accepted, delivered, bounced, complained: each
// says the provider had the message). It is not found only when the
// provider's watermark (ledger.Watermark.At: the newest event's time less
// Lag, or an operator's "digest events watermark") is more than
// ClockMargin past the time the key's send started; otherwise the answer
// is an error wrapping ErrNotComplete, and the run holds the digest
// for a later look-up.
type Lookup struct {
	provider string
	lag      time.Duration
	ledger   Ledger
}

var _ digest.Lookup = (*Lookup)(nil)

// New returns the events look-up of provider on l with lag (0:
// DefaultLag). l may be nil and bound later (Bind): the settings
// are read before the ledger is opened.
func New(provider string, l Ledger, lag time.Duration) *Lookup {
	if lag <= 0 {
		lag = DefaultLag
	}
	return &Lookup{provider: provider, lag: lag, ledger: l}
}

// Bind sets the ledger the look-up reads.
func (l *Lookup) Bind(ledger Ledger) { l.ledger = ledger }

// Provider is the provider whose events the look-up reads.
func (l *Lookup) Provider() string { return l.provider }

// Lookup implements digest.Lookup. The reference of a found key is the
// provider's name and the id of its first event of the key.
func (l *Lookup) Lookup(ctx context.Context, key digest.Key) (string, bool, error) {
	if l.ledger == nil {
		return "", false, fmt.Errorf("events lookup %s: no ledger to read", l.provider)
	}
	ev, err := l.ledger.EventEvidence(ctx, l.provider, key)
	if err != nil {
		return "", false, temporary(fmt.Errorf("events lookup %s: %w", l.provider, err))
	}
	if len(ev.Events) > 0 {
		e := ev.Events[0]
		return l.provider + " event " + e.ID + " (" + string(e.Kind) + ")", true, nil
	}
	if key == sender.ProbeKey {
		return "", false, nil // sender.CheckReachable: the ledger answered
	}
	wm := ev.Watermark.At(l.lag)
	switch {
	case !ev.Receipt:
		return "", false, temporary(fmt.Errorf("events lookup %s: %s has no receipt, so no send time to compare the watermark with", l.provider, key))
	case wm.After(ev.SendAt.Add(ClockMargin)):
		return "", false, nil
	}
	mark := "none"
	if !wm.IsZero() {
		mark = wm.UTC().Format(time.RFC3339)
	}
	return "", false, temporary(fmt.Errorf("events lookup %s: %w (send %s, watermark %s)", l.provider, ErrNotComplete,
		ev.SendAt.UTC().Format(time.RFC3339), mark))
}

// temporary wraps err as a temporary failure: the run asks again later.
func temporary(err error) error {
	return &digest.SendError{Class: digest.SendTemporary, Err: err}
}
