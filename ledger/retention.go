package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// KeptTable is a table whose rows the ledger keeps until a prune removes
// them, each by a horizon of its own: receipts (with their history) and
// observations by PruneRequest's cutoff, provider events and soft-bounce
// counts by EventRetention's. The other tables are kept for ever: they
// hold a few rows a week (pins, runs, expectations, tombstones, the
// providers' watermarks) or what a person asked for until someone undoes
// it (suppressions and their history).
type KeptTable string

// The kept tables, as named in status and the metrics' table label.
const (
	TableReceipts       KeptTable = "receipts"
	TableObservations   KeptTable = "observations"
	TableProviderEvents KeptTable = "provider_events"
	TableSoftBounces    KeptTable = "soft_bounces"
)

// KeptTables are the kept tables, in the order status prints them.
var KeptTables = []KeptTable{TableReceipts, TableObservations, TableProviderEvents, TableSoftBounces}

// OldestRow is the oldest row of one kept table: what shows whether its
// horizon is honoured ("digest status", the prune's metrics).
type OldestRow struct {
	Table KeptTable
	// At is the time the table's horizon compares, of its oldest row:
	// when an observation was recorded, when a provider event was
	// received, when an address last soft-bounced in the week of its
	// count. For receipts, which go a week at a time, it is the start
	// (UTC) of Week, the oldest ISO week holding one: no receipt of a week
	// is updated before the week starts, and a receipt's own last update
	// has no index to find the oldest by. Zero: the table is empty.
	At time.Time
	// Week is, for receipts, the oldest ISO week holding one; else zero.
	Week digest.ISOWeek
}

// Retention is how a store reports the oldest rows of its kept tables.
type Retention interface {
	// OldestRows returns the oldest row of every kept table, in
	// KeptTables' order, each read by an index: a few small queries
	// whatever the size of the ledger.
	OldestRows(ctx context.Context) ([]OldestRow, error)
}

// OldestReceipts is the OldestRow of receipts whose oldest ISO week is
// week ("": none).
func OldestReceipts(week string) (OldestRow, error) {
	row := OldestRow{Table: TableReceipts}
	if week == "" {
		return row, nil
	}
	w, err := digest.ParseISOWeek(week)
	if err != nil {
		return row, fmt.Errorf("oldest receipts: %w", err)
	}
	row.Week, row.At = w, w.Start(time.UTC)
	return row, nil
}

// EventRetention is how long a prune keeps what the mail providers
// reported through their webhooks ("digest serve"), and the evidence it
// keeps longer. Each horizon is an age before the ledger's clock, the one
// PruneRequest.OlderThan is cut by (with PruneRequest.Before too); zero
// leaves its table whole.
//
// A provider event goes once it was received more than ProviderEvents
// ago, except:
//   - an event naming the key of a receipt the prune keeps: the events
//     look-up (DIGEST_LOOKUP_URL=events:PROVIDER) of a maybe-sent digest,
//     and "digest verify", read the events of its key, and one pruned
//     early would turn "the provider had it" into "not found", and a
//     resend. It goes with its receipt, or after it;
//   - each provider's newest event (by its counted time, ties kept): it
//     is the provider's watermark (Watermark.Newest), which would
//     otherwise move back.
//
// A soft-bounce count (an address's bounces in one ISO week, UTC) goes
// once the address last soft-bounced in that week more than SoftBounces
// ago, except a week a soft bounce still to come may count in its streak:
// one of the Policy.SoftBounceWeeks weeks ending with the week of the
// ledger's clock less Lag (an event may arrive that late: webhook
// retries), or a later one. A bounce that arrives later than Lag after it
// occurred finds a shorter streak than it would have: the address is
// suppressed later, never sent a second copy.
type EventRetention struct {
	// ProviderEvents is the horizon of provider_events
	// (DIGEST_EVENTS_RETENTION); 0: none pruned.
	ProviderEvents time.Duration
	// SoftBounces is the horizon of soft_bounces
	// (DIGEST_SOFT_BOUNCE_RETENTION); 0: none pruned.
	SoftBounces time.Duration
	// Policy is the soft-bounce policy of "digest serve"
	// (DIGEST_SOFT_BOUNCE_WEEKS): how far back a streak reaches.
	Policy EventPolicy
	// Lag is how long after it occurred an event may still arrive
	// (DIGEST_EVENTS_LAG); 0: none.
	Lag time.Duration
}

// Validate refuses a negative horizon or lag.
func (r EventRetention) Validate() error {
	if r.ProviderEvents < 0 || r.SoftBounces < 0 || r.Lag < 0 {
		return fmt.Errorf("%w: prune: a negative event retention or lag", ErrInvalid)
	}
	return nil
}

// EventCutoffs are the times and week an event retention compares with,
// by the ledger's clock: rows older than a zero cutoff are none.
type EventCutoffs struct {
	// ProviderEvents: events received before it may go; zero: none.
	ProviderEvents time.Time
	// SoftBounces: counts whose last bounce is before it may go; zero:
	// none.
	SoftBounces time.Time
	// StreakWeek is the first ISO week a soft bounce still to come may
	// count in its streak: counts of it and later weeks stay.
	StreakWeek digest.ISOWeek
}

// Cutoffs returns r's cutoffs at now, the ledger's clock.
func (r EventRetention) Cutoffs(now time.Time) EventCutoffs {
	var c EventCutoffs
	if r.ProviderEvents > 0 {
		c.ProviderEvents = now.Add(-r.ProviderEvents).UTC().Truncate(time.Microsecond)
	}
	if r.SoftBounces > 0 {
		c.SoftBounces = now.Add(-r.SoftBounces).UTC().Truncate(time.Microsecond)
	}
	weeks := r.Policy.Weeks(now.Add(-r.Lag))
	c.StreakWeek, _ = digest.ParseISOWeek(weeks[len(weeks)-1])
	return c
}
