package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// Store is a receipt ledger with the operations the digest command needs
// beyond the run loop's digest.Ledger: migrations, operator review, counts
// and pruning.
type Store interface {
	digest.Ledger
	// ClaimEnder ends the claims of digests no run will send (a customer
	// suppressed or with nothing to send after a run that claimed it
	// crashed).
	digest.ClaimEnder
	// WeekReceipts lists a week's unfinished receipts and its pins: a run
	// that read the whole source ends the claims of customers not in it.
	digest.WeekReceipts
	// VersionCounter counts a week's sent receipts by content version:
	// a run refuses to send a week again under a new version by accident.
	digest.VersionCounter

	// Migrate applies pending migrations. It is safe to run twice and from
	// two processes at once.
	Migrate(ctx context.Context) error
	// MigrateDownTo rolls the schema back to version (1 or more), undoing
	// each later migration, newest first, under Migrate's lock. It refuses
	// with ErrLiveClaims while a receipt is claimed under a lease that has
	// not expired: a run is sending, and would fail mid-send on the older
	// schema.
	MigrateDownTo(ctx context.Context, version int64) error
	// Schema returns the ledger's migration version and the one this
	// binary needs; Schema.Err says whether the binary can use it.
	Schema(ctx context.Context) (Schema, error)

	// List returns receipts matching f, ordered by key, at most f.Limit.
	List(ctx context.Context, f ListFilter) ([]Receipt, error)
	// Show returns one receipt and its history, oldest event first, or
	// ErrNotFound.
	Show(ctx context.Context, key digest.Key) (Receipt, []Event, error)
	// Release makes a held receipt retryable and due now, clearing
	// MaybeSent so the next run sends it; see the package doc for
	// quarantined receipts. Other states give ErrWrongState.
	Release(ctx context.Context, key digest.Key, by Action) error
	// MarkSent records that a held receipt was in fact sent, as providerRef.
	MarkSent(ctx context.Context, key digest.Key, providerRef string, by Action) error
	// Acknowledge closes a quarantined receipt that was sent (its digest
	// changed after the customer got it): it becomes acknowledged, kept
	// with its fingerprints, sent time and provider reference as
	// evidence, settled, never claimed or quarantined again. A quarantined
	// or held receipt not known to be sent gets ErrNotSent (release is
	// what sends it) unless unsent says the operator closes it knowingly;
	// other states give ErrWrongState.
	Acknowledge(ctx context.Context, key digest.Key, unsent bool, by Action) error
	// Counts counts the receipts of a week by state, with the ages of the
	// oldest claimed and oldest retryable ones.
	Counts(ctx context.Context, week digest.ISOWeek) (Counts, error)
	// Prune removes what p selects and reports, by week, how many
	// receipts went (or, with p.DryRun, would go). It leaves a
	// digest.PruneTombstone for every snapshot pin of each week it took
	// receipts from (none on a dry run). It also removes the provider
	// events and soft-bounce counts past p.Events' horizons, after the
	// receipts and in the transaction of their last deletion, but what a
	// receipt it keeps or a streak under way still needs (see
	// EventRetention), and counts them.
	Prune(ctx context.Context, p PruneRequest) (PruneResult, error)
	// Tombstones returns the prune tombstones of week, or of every week
	// when week is zero, newest week first.
	Tombstones(ctx context.Context, week digest.ISOWeek) ([]digest.PruneTombstone, error)
	// Pinned returns what the first run of pin fixed, and false when the
	// week is not pinned yet; it never pins (previews and test sends).
	Pinned(ctx context.Context, pin digest.SnapshotPin) (digest.WeekPin, bool, error)
	// Repin moves pin's cutoff (as_of) forward to asOf and makes it whole
	// (not partial), recording where it was, when, and by's detail; it
	// returns the previous as_of. It refuses (ErrNotFound: not pinned;
	// ErrWrongState: as_of is already at or past asOf and not partial) in
	// the same statement that would move it, so two repins cannot both
	// move one pin. "digest repin": the way out of a week pinned early.
	Repin(ctx context.Context, pin digest.SnapshotPin, asOf time.Time, by Action) (time.Time, error)
	// ObservedKeys returns those of keys that observe-mode runs (and a
	// cohort run's observed rest) recorded for week: status tells an
	// observed-not-sent customer from one no run has met, a page of
	// digests at a time.
	ObservedKeys(ctx context.Context, week digest.ISOWeek, keys []digest.Key) (map[digest.Key]bool, error)
	// RecordRunEnd records how a run of pin ended, replacing what the
	// previous run of pin recorded: "digest status" shows the last one.
	RecordRunEnd(ctx context.Context, pin digest.SnapshotPin, end RunEnd) error
	// LastRun returns what RecordRunEnd last recorded for pin, and false
	// when no run of pin has ended yet.
	LastRun(ctx context.Context, pin digest.SnapshotPin) (RunEnd, bool, error)
	// RecordExpectation records what a run's read of pin's shard e.Shard
	// found, replacing what an earlier read of that shard recorded.
	RecordExpectation(ctx context.Context, pin digest.SnapshotPin, e Expectation) error
	// Expectations returns pin's recorded expectations, every shard, and
	// whether the week holds other pins or observations.
	Expectations(ctx context.Context, pin digest.SnapshotPin) (WeekExpectations, error)
	// Repeats reports how soon observed keys came again (observe mode).
	Repeats(ctx context.Context, week digest.ISOWeek, horizon time.Duration) (RepeatReport, error)
	// WeekKeys returns the keys of week's receipts in state, in key order,
	// after the key after ("" from the start), at most limit (default
	// 1000): one page of a stream that reads a large week without holding
	// it, or any receipt's other columns ("digest verify").
	WeekKeys(ctx context.Context, week digest.ISOWeek, state digest.State, after digest.Key, limit int) ([]digest.Key, error)
	// WeekStates returns the state of each of keys that is a receipt of
	// week; keys of other weeks, or of none, are absent from the map.
	WeekStates(ctx context.Context, week digest.ISOWeek, keys []digest.Key) (map[digest.Key]digest.State, error)

	// Suppressions: the suppression list, for operators and the endpoint.
	Suppressions
	// ProviderEvents: the events providers reported, for "digest serve"'s
	// webhook intake and the events look-up.
	ProviderEvents
	// Retention: the oldest row of each table Prune keeps for a horizon.
	Retention

	// Durability returns the database settings that decide whether a
	// committed receipt survives a crash of the database, as the store's
	// own connection sees them; Settings.Err says whether they can.
	Durability(ctx context.Context) (Settings, error)

	// Close releases what the store opened: the SQLite file; nothing on
	// PostgreSQL, whose pool is its caller's to close.
	Close() error
}

// Sentinel errors of the operator operations.
var (
	// ErrNotFound: no receipt under that key.
	ErrNotFound = errors.New("receipt not found")
	// ErrWrongState: the receipt's state does not allow the operation.
	ErrWrongState = errors.New("receipt is in the wrong state for this operation")
	// ErrWasSent: a quarantined receipt that was sent is never released.
	ErrWasSent = errors.New("quarantined receipt was already sent; it stays quarantined (acknowledge closes it)")
	// ErrNotSent: a receipt not known to be sent is not acknowledged
	// unless the operator says so: release sends it.
	ErrNotSent = errors.New("receipt was not sent, or maybe not: release it so the next run sends it, or acknowledge naming unsent to close it unsent")
	// ErrMaybeSent: a held receipt's send may have reached the provider,
	// and nothing says it did not: releasing it could send the customer a
	// second copy (see ReleaseWithEvidence).
	ErrMaybeSent = errors.New("receipt may have been sent (held): no look-up found it missing at the provider, and releasing it could send a second copy")
	// ErrInvalid: a request is malformed (a programming error).
	ErrInvalid = errors.New("invalid ledger request")
)

// Action says who did an operator action and why, for the history.
type Action struct {
	By     string // operator name or id; never a customer identifier
	Reason string
}

func (a Action) Detail(what string) string {
	return fmt.Sprintf("%s by %q: %s", what, a.By, a.Reason)
}

// Receipt is one row of the ledger, for operators.
type Receipt struct {
	Key                 digest.Key
	KeyID               string
	State               digest.State
	Fingerprint         string
	ConflictFingerprint string // set when quarantined by a differing fingerprint
	Attempts            int
	Token               int64
	LeaseExpires        time.Time
	SendStarted         bool
	SendStartedAt       time.Time
	MaybeSent           bool
	NextAttempt         time.Time
	FirstClaimed        time.Time
	LastAttempt         time.Time
	SentAt              time.Time
	ProviderRef         string
	LastError           string
	RunID               string
	FirstRunID          string // the first claim's run, once a later claim or quarantine replaced RunID; else empty
	Week                string
	UpdatedAt           time.Time
	// AddressKey is the recipient's address key (an HMAC) of a receipt
	// that failed permanently (digest.Finish.AddressKey); else empty.
	AddressKey string
	// Type and Version are the digest type and content version the
	// receipt was claimed under (digest.ClaimRequest); empty for a
	// receipt made before receipts stored them: unknown.
	Type, Version string
}

// Sentness is whether a receipt's message reached the provider, as far as
// the ledger knows: review decisions turn on it (see Receipt.Sentness).
type Sentness string

const (
	Sent      Sentness = "sent"       // the provider accepted it (sent_at)
	MaybeSent Sentness = "maybe sent" // a send may have reached the provider; nobody could tell
	NotSent   Sentness = "not sent"   // no send reached the provider
)

// Sentness tells whether r's message was sent: sent once a send was
// recorded (in any state since, quarantined or acknowledged included);
// maybe sent when held, marked maybe sent, or claimed after its send
// started; otherwise not sent.
func (r Receipt) Sentness() Sentness {
	switch {
	case !r.SentAt.IsZero():
		return Sent
	case r.State == digest.StateHeld || r.MaybeSent || r.State == digest.StateClaimed && r.SendStarted:
		return MaybeSent
	}
	return NotSent
}

// Event is one transition in a receipt's history.
type Event struct {
	ID     int64
	Key    digest.Key
	At     time.Time
	From   digest.State // empty: the receipt did not exist
	To     digest.State
	RunID  string
	Detail string
	// FromReceipt marks an event no history row holds: Show tells it
	// from the receipt's own columns (see ReceiptStory).
	FromReceipt bool
}

// ListFilter selects receipts for List. Zero fields match everything.
type ListFilter struct {
	State digest.State
	Week  digest.ISOWeek
	After digest.Key // page after this key (the last key of the previous page)
	Limit int        // default 100
}

func (f ListFilter) PageSize() int {
	if f.Limit <= 0 {
		return 100
	}
	return f.Limit
}

func (f ListFilter) WeekString() string {
	if f.Week.IsZero() {
		return ""
	}
	return f.Week.String()
}

// Counts summarises one week of receipts.
type Counts struct {
	ByState         map[digest.State]int64
	OldestClaimed   time.Duration // age of the oldest claimed receipt's last attempt; 0 if none
	OldestRetryable time.Duration // age of the oldest retryable receipt; 0 if none
}

// SettledStates are the final states: nothing more happens to such a
// receipt unless its content changes (and an acknowledged one not even
// then). ReviewStates wait for an operator.
var (
	SettledStates = []digest.State{digest.StateSent, digest.StateFailed, digest.StateAcknowledged}
	ReviewStates  = []digest.State{digest.StateHeld, digest.StateQuarantined}
)

// Settled counts the receipts in SettledStates.
func (c Counts) Settled() int64 { return c.sum(SettledStates) }

// NeedsReview counts the receipts in ReviewStates.
func (c Counts) NeedsReview() int64 { return c.sum(ReviewStates) }

func (c Counts) sum(states []digest.State) int64 {
	var n int64
	for _, s := range states {
		n += c.ByState[s]
	}
	return n
}

// PruneRequest selects what Prune removes.
//
// Only settled receipts go: sent, failed and acknowledged ones (and held
// or quarantined ones when named). A claimed receipt (a run holds it, or held it and
// crashed, perhaps mid-send) and a retryable one (perhaps maybe-sent) are
// live evidence and are kept whatever their age, as is every receipt of a
// week whose run started at or after the cutoff (Ledger.StartWeek).
//
// The cutoff is OlderThan before the ledger's clock: the store reads the
// time where the rows are, so that a prune on a machine whose clock is
// far ahead cannot take the receipts of a week run seconds earlier.
// PostgreSQL's store takes the earlier of the server's now() and its own
// clock (postgres.Config.Now): a process clock behind only prunes less,
// and the contract suite's fake clocks keep working. SQLite's store uses its own
// clock: the embedded ledger has no server, the process that runs the
// statement is the database, and its clock is the one that stamped every
// row it compares.
type PruneRequest struct {
	// OlderThan: receipts last updated, and observations recorded, more
	// than this long before the ledger's clock (see above). "digest
	// prune" sets it.
	OlderThan time.Duration
	// Before is an absolute cutoff, the caller's clock, used instead of
	// OlderThan: only for callers whose clock is the ledger's (tests with
	// a fake clock given to both). Exactly one of the two is set.
	Before time.Time
	// IncludeHeld and IncludeQuarantined also remove those receipts, which
	// are otherwise kept whatever their age.
	IncludeHeld        bool
	IncludeQuarantined bool
	// Events is the retention of the provider events and soft-bounce
	// counts (see EventRetention); zero keeps them whole.
	Events EventRetention
	// DryRun counts without removing and writes no tombstone.
	DryRun bool
}

// prunableStates are the states Prune may remove: an allow-list, so that a
// state added later is kept until someone decides otherwise.
func (p PruneRequest) PrunableStates() []string {
	states := []string{string(digest.StateSent), string(digest.StateFailed), string(digest.StateAcknowledged)}
	if p.IncludeHeld {
		states = append(states, string(digest.StateHeld))
	}
	if p.IncludeQuarantined {
		states = append(states, string(digest.StateQuarantined))
	}
	return states
}

func (p PruneRequest) Validate() error {
	if p.Before.IsZero() == (p.OlderThan <= 0) {
		return fmt.Errorf("%w: prune needs a cutoff: an age (OlderThan) or a time (Before)", ErrInvalid)
	}
	return p.Events.Validate()
}

// Cutoff returns the time Prune compares with: Before, or OlderThan
// before now, the ledger's clock (see PruneRequest).
func (p PruneRequest) Cutoff(now time.Time) time.Time {
	if p.OlderThan > 0 {
		return now.Add(-p.OlderThan)
	}
	return p.Before
}

// PruneResult is what a prune removed (or, dry, would remove).
type PruneResult struct {
	Receipts int64        // in all
	Weeks    []PrunedWeek // by week, oldest first
	// ClaimsEnded counts the claims (and retryable receipts) of weeks
	// older than the cutoff that the prune ended before deleting
	// (EndStaleClaims; a dry run: would end); ClaimsHeld, those of them
	// ended held because their send may have started.
	ClaimsEnded int64
	ClaimsHeld  int64
	// ProviderEvents and SoftBounces count the provider events and
	// soft-bounce counts it removed (dry: would remove) by
	// PruneRequest.Events.
	ProviderEvents int64
	SoftBounces    int64
}

// PrunedWeek counts the receipts one prune removed from one ISO week.
type PrunedWeek struct {
	Week     string
	Receipts int64
	// Dropped: the week went whole with its partition (PostgreSQL, where
	// receipts is partitioned by week), instead of by a DELETE of its rows.
	Dropped bool
}

func (r *PruneResult) Add(week string, n int64) {
	r.Weeks = append(r.Weeks, PrunedWeek{Week: week, Receipts: n})
	r.Receipts += n
}

// AddDropped adds a week whose partition went whole.
func (r *PruneResult) AddDropped(week string, n int64) {
	r.Weeks = append(r.Weeks, PrunedWeek{Week: week, Receipts: n, Dropped: true})
	r.Receipts += n
}

// RepeatReport buckets the gaps between consecutive observations of one key.
type RepeatReport struct {
	Observations  int64
	Keys          int64
	UnderFiveMin  int64 // gap < 5 minutes
	SameDay       int64 // 5 minutes <= gap < 24 hours
	Later         int64 // 24 hours <= gap <= horizon
	BeyondHorizon int64 // gap > horizon
}

// DefaultWeekPage is WeekKeys's page size when its limit is 0 or less.
const DefaultWeekPage = 1000
