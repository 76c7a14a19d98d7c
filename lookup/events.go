package lookup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// EventsScheme is DIGEST_LOOKUP_URL's scheme of the events look-up:
// events:PROVIDER, PROVIDER the name "digest serve" takes the provider's
// webhooks under (events:ses, events:sendgrid...).
const EventsScheme = "events"

// DefaultEventsLag is Events.Lag's default (DIGEST_EVENTS_LAG): longer
// than the providers retry a webhook the intake did not take (Postmark
// about 10 hours, Mailgun 8, SendGrid 24, Svix about 27 with its last
// attempts), so an event still on its way is not taken for one that
// never comes.
const DefaultEventsLag = 30 * time.Hour

// ClockMargin is how far past a send's time the watermark must be for
// "not found": room for the provider's clock (which dates the events)
// running behind the ledger's (which dates the send).
const ClockMargin = 5 * time.Minute

// ErrEventsNotComplete is wrapped by the events look-up's error when no
// event of the key is stored and the provider's events are not known to be
// complete past the send: the provider may yet report it. The run keeps
// the digest maybe-sent and asks again later; it never resends on it.
var ErrEventsNotComplete = errors.New("no provider event for the key yet, and the provider's events are not known complete past its send")

// EventLedger is what the events look-up reads: the ledger's provider
// events (ledger.ProviderEvents).
type EventLedger interface {
	EventEvidence(ctx context.Context, provider string, key digest.Key) (ledger.Evidence, error)
}

// Events answers from the provider events "digest serve" recorded from
// the provider's webhooks (ledger.ProviderEvents): for a provider with no
// search API (Amazon SES, SendGrid, a relay that posts events) that sends
// an event for every message it takes. A key is found when any event of
// the provider names it (accepted, delivered, bounced, complained: each
// says the provider had the message). It is not found only when the
// provider's watermark (ledger.Watermark.At: the newest event's time less
// Lag, or an operator's "digest events watermark") is more than
// ClockMargin past the time the key's send started; otherwise the answer
// is an error wrapping ErrEventsNotComplete, and the run holds the digest
// for a later look-up.
type Events struct {
	provider string
	lag      time.Duration
	ledger   EventLedger
}

var _ digest.Lookup = (*Events)(nil)

// NewEvents returns the events look-up of provider on l with lag (0:
// DefaultEventsLag). l may be nil and bound later (Bind): the settings
// are read before the ledger is opened.
func NewEvents(provider string, l EventLedger, lag time.Duration) *Events {
	if lag <= 0 {
		lag = DefaultEventsLag
	}
	return &Events{provider: provider, lag: lag, ledger: l}
}

// Bind sets the ledger the look-up reads.
func (l *Events) Bind(ledger EventLedger) { l.ledger = ledger }

// Provider is the provider whose events the look-up reads.
func (l *Events) Provider() string { return l.provider }

// Lookup implements digest.Lookup. The reference of a found key is the
// provider's name and the id of its first event of the key.
func (l *Events) Lookup(ctx context.Context, key digest.Key) (string, bool, error) {
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
	if key == checkKey {
		return "", false, nil // Check: the ledger answered
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
	return "", false, temporary(fmt.Errorf("events lookup %s: %w (send %s, watermark %s)", l.provider, ErrEventsNotComplete,
		ev.SendAt.UTC().Format(time.RFC3339), mark))
}
