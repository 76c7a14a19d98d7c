package ledger

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// ProviderEvents is the ledger's record of what mail providers reported
// through their webhooks ("digest serve"): every event that names a digest
// key or an address, the suppressions they cause, the soft-bounce streaks
// of addresses, and each provider's watermark. The events look-up
// (sender/events) reads it to tell whether the provider took a message.
// Both stores implement it as part of Store.
type ProviderEvents interface {
	// RecordProviderEvent stores e and acts on it in one transaction:
	// a hard bounce, a complaint or the provider's unsubscribe suppresses
	// the address (reason hard_bounce, complaint or unsubscribe, source
	// the provider); a soft bounce counts in its ISO week (UTC), and
	// suppresses the address (reason soft_bounce) once it has bounced in
	// p.SoftBounceWeeks consecutive weeks ending with this one; a bounce
	// or complaint naming the key of a receipt adds a row to the
	// receipt's history. An event already stored under (provider, id) is a
	// replay: nothing changes and the outcome says so. Committed before it
	// returns: the caller may then acknowledge the event to the provider.
	RecordProviderEvent(ctx context.Context, e ProviderEvent, p EventPolicy) (EventOutcome, error)
	// EventEvidence returns what the ledger knows about key at provider:
	// its stored events, the provider's watermark inputs, and the send
	// time of the key's receipt.
	EventEvidence(ctx context.Context, provider string, key digest.Key) (Evidence, error)
	// AdvanceWatermark records an operator's statement that provider's
	// events are complete up to until, which is not after the ledger's
	// clock (ErrInvalid). It never moves back: it returns
	// the watermark in force after the call (until, or a later one
	// recorded before).
	AdvanceWatermark(ctx context.Context, provider string, until time.Time, by Action) (time.Time, error)
	// Watermarks returns every provider the ledger has heard from or that
	// an operator named, by name.
	Watermarks(ctx context.Context) ([]Watermark, error)
}

// EventKind is what a provider event says happened to a message; the
// values are stored. Package webhook's Kind has the same values.
type EventKind string

// The stored kinds of provider events.
const (
	EventAccepted    EventKind = "accepted"
	EventDelivered   EventKind = "delivered"
	EventHardBounce  EventKind = "hard_bounce"
	EventSoftBounce  EventKind = "soft_bounce"
	EventComplaint   EventKind = "complaint"
	EventUnsubscribe EventKind = "unsubscribe"
)

// EventKinds are the stored kinds.
var EventKinds = []EventKind{EventAccepted, EventDelivered, EventHardBounce, EventSoftBounce, EventComplaint, EventUnsubscribe}

// SuppressionReason is the reason of the suppression an event of kind k
// causes at once, and false for the kinds that cause none (a soft bounce
// suppresses only after a streak).
func (k EventKind) SuppressionReason() (digest.SuppressionReason, bool) {
	switch k {
	case EventHardBounce:
		return digest.ReasonHardBounce, true
	case EventComplaint:
		return digest.ReasonComplaint, true
	case EventUnsubscribe:
		return digest.ReasonUnsubscribe, true
	}
	return "", false
}

// NotesReceipt reports whether an event of kind k is written on the
// history of the receipt whose key it names: what happened after the
// provider took the message (a bounce, a complaint).
func (k EventKind) NotesReceipt() bool {
	return k == EventHardBounce || k == EventSoftBounce || k == EventComplaint
}

// ProviderEvent is one stored provider event. It holds keys only: the
// address is stored as its HMAC (Keyring.AddressKeys), never in clear.
type ProviderEvent struct {
	// Provider and ID identify the event (ID is unique per provider).
	Provider string
	ID       string
	Kind     EventKind
	// Key is the digest key the message carried; empty when none.
	Key digest.Key
	// AddressKeys are the recipient address's candidate keys, current
	// key id first (Keyring.AddressKeys): stored under the first,
	// suppressions and streaks found under any. Empty when the event
	// names no address. Read back: the one stored key, or none.
	AddressKeys []digest.SuppressionKey
	// Detail is a short description for the history (the provider's
	// bounce type or SMTP status), never customer data.
	Detail string
	// Occurred is when it happened, by the provider's clock.
	Occurred time.Time
	// Received is when the ledger stored it, by the ledger's clock (set
	// on read).
	Received time.Time
}

// Validate checks an event to record.
func (e ProviderEvent) Validate() error {
	if e.Provider == "" || len(e.Provider) > 32 {
		return fmt.Errorf("%w: provider event: provider %q: want 1 to 32 bytes", ErrInvalid, e.Provider)
	}
	if e.ID == "" || len(e.ID) > 200 {
		return fmt.Errorf("%w: provider event: id of %d bytes: want 1 to 200", ErrInvalid, len(e.ID))
	}
	known := false
	for _, k := range EventKinds {
		known = known || e.Kind == k
	}
	if !known {
		return fmt.Errorf("%w: provider event kind %q", ErrInvalid, e.Kind)
	}
	if e.Key != "" {
		if _, err := digest.ParseKey(string(e.Key)); err != nil {
			return fmt.Errorf("%w: provider event key: %w", ErrInvalid, err)
		}
	}
	for _, k := range e.AddressKeys {
		if _, err := digest.ParseKey(string(k)); err != nil {
			return fmt.Errorf("%w: provider event address key: %w", ErrInvalid, err)
		}
	}
	if e.Occurred.IsZero() {
		return fmt.Errorf("%w: provider event without a time", ErrInvalid)
	}
	if len(e.Detail) > 200 {
		return fmt.Errorf("%w: provider event detail of %d bytes: want at most 200", ErrInvalid, len(e.Detail))
	}
	return nil
}

// AddressKey is the key the event's address is stored under, or "".
func (e ProviderEvent) AddressKey() digest.SuppressionKey {
	if len(e.AddressKeys) == 0 {
		return ""
	}
	return e.AddressKeys[0]
}

// Counted is the time the event counts for its provider's watermark: when
// it occurred, but never later than when the ledger received it, so that
// a provider clock running ahead cannot move the watermark into the future.
func (e ProviderEvent) Counted(received time.Time) time.Time {
	if e.Occurred.After(received) {
		return received
	}
	return e.Occurred
}

// EventPolicy is how RecordProviderEvent acts on soft bounces.
type EventPolicy struct {
	// SoftBounceWeeks is how many consecutive ISO weeks (UTC) an address
	// must soft-bounce in to be suppressed (DIGEST_SOFT_BOUNCE_WEEKS);
	// 0 or less: DefaultSoftBounceWeeks.
	SoftBounceWeeks int
}

// DefaultSoftBounceWeeks is EventPolicy.SoftBounceWeeks's default.
const DefaultSoftBounceWeeks = 3

// Weeks returns the ISO weeks (UTC) a soft bounce at t must find bounces
// in to suppress: the week of t and the SoftBounceWeeks-1 before it.
func (p EventPolicy) Weeks(t time.Time) []string {
	n := p.SoftBounceWeeks
	if n <= 0 {
		n = DefaultSoftBounceWeeks
	}
	w := digest.WeekOf(t, time.UTC)
	out := make([]string, n)
	for i := range out {
		out[i] = w.String()
		w = w.Prev()
	}
	return out
}

// EventOutcome is what RecordProviderEvent did.
type EventOutcome struct {
	// Replay: the event was stored before; nothing changed.
	Replay bool
	// Suppressed: the event added a suppression of its address (a
	// suppression already in force is not added again).
	Suppressed bool
	// Reason is the reason of the suppression added, when Suppressed.
	Reason digest.SuppressionReason
	// Noted: a row went on the history of the receipt the key names.
	Noted bool
	// SoftBounceWeeks is, for a soft bounce, how many consecutive weeks
	// ending with this event's the address has soft-bounced in (counted
	// up to the policy's number).
	SoftBounceWeeks int
}

// Evidence is what EventEvidence returns.
type Evidence struct {
	// Events are the key's events at the provider, oldest first.
	Events []ProviderEvent
	// Watermark is the provider's watermark inputs.
	Watermark Watermark
	// Receipt: the key has a receipt; SendAt is then when its send last
	// started (or, for a receipt without a send mark, its last attempt):
	// the time after which the provider's event about it can occur.
	Receipt bool
	SendAt  time.Time
}

// Watermark is what the ledger knows of how complete a provider's events
// are. The look-up's watermark is the later of Until and Newest less the
// events lag (DIGEST_EVENTS_LAG): see Watermark.At.
type Watermark struct {
	Provider string
	// Newest is the latest Counted time of the provider's stored events;
	// zero when none.
	Newest time.Time
	// Until is the time an operator stated the events complete up to
	// ("digest events watermark"); zero when none.
	Until time.Time
	// Events counts the provider's stored events.
	Events int64
}

// At returns the watermark: events of the provider that occurred before
// it have all been received. Newest less lag stands for the events still
// on their way (providers retry a webhook the intake refused or missed
// for hours); Until is an operator's word. Zero when neither says
// anything.
func (w Watermark) At(lag time.Duration) time.Time {
	at := w.Until
	if !w.Newest.IsZero() {
		if auto := w.Newest.Add(-lag); auto.After(at) {
			at = auto
		}
	}
	return at
}

// HistoryProviderPrefix starts the history text of a receipt-history row a
// provider event wrote (rules.ProviderNote, in the stores): a note, not a
// transition (the receipt's state is unchanged; the row's from and to are
// that state).
const HistoryProviderPrefix = "provider "

// IsProviderNote reports whether e is a row rules.ProviderNote wrote rather
// than a transition.
func IsProviderNote(e Event) bool {
	return e.From == e.To && strings.HasPrefix(e.Detail, HistoryProviderPrefix)
}
