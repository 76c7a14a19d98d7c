package digest

import (
	"context"
	"errors"
	"time"
)

// State is the state of a receipt in the ledger.
type State string

// The receipt states. See "The ledger" in docs/design.md for the transitions.
const (
	// StateClaimed: a run holds the lease and may send. Whether the send
	// may have started is recorded separately (see Ledger.StartSending).
	StateClaimed State = "claimed"
	// StateSent is final: the provider accepted the message.
	StateSent State = "sent"
	// StateRetryable: a temporary failure; claimable again at NextAttempt.
	StateRetryable State = "retryable"
	// StateFailed: a permanent failure; never retried automatically.
	StateFailed State = "failed"
	// StateHeld: a send may have reached the provider and nobody could tell;
	// an operator decides (release for resend, or mark sent).
	StateHeld State = "held"
	// StateQuarantined: the same key arrived with a different fingerprint.
	// Never claimable; the original fingerprint is kept for investigation.
	StateQuarantined State = "quarantined"
	// StateAcknowledged is final: an operator closed a receipt that waited
	// for review (typically quarantined after it was sent: the digest
	// changed once the customer had it) with a recorded reason. Kept as
	// evidence; never claimed, quarantined or sent again.
	StateAcknowledged State = "acknowledged"
)

// Outcome is what a claim decided.
type Outcome int

// Claim outcomes. Only OutcomeClaimed gives permission to send.
const (
	OutcomeClaimed     Outcome = iota + 1 // the caller holds the lease; see ClaimResult.MaybeSent
	OutcomeAlreadySent                    // sent before; ProviderRef and SentAt say when and as what
	OutcomeBusy                           // another holder's lease is live
	OutcomeNotDue                         // retryable, but not before NextAttempt
	OutcomeQuarantined                    // fingerprint differs, now or earlier
	OutcomeHeld                           // waiting for an operator
	OutcomeFailed                         // failed permanently
)

var outcomeNames = [...]string{"", "claimed", "already_sent", "busy", "not_due", "quarantined", "held", "failed"}

func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// ClaimRequest asks for permission to send the digest whose receipt is
// stored under one of Keys.
type ClaimRequest struct {
	// Keys are the candidate keys, the week's pinned key id first
	// (Keyring.Candidates of the keyring Keyring.Pinned returns). A
	// receipt already stored under another key governs; a new receipt is
	// created under Keys[0].
	Keys        []Key
	Fingerprint string  // Digest.Fingerprint
	Parts       string  // Keyring.FingerprintParts: which part a quarantine changed; "" unknown
	Week        ISOWeek // stored for pruning and reporting
	// Type and Version are the digest type and content version of the
	// keys (Identity.Type, Identity.Version): a new receipt stores them,
	// so that the ledger can count a week's sent receipts by version
	// (VersionCounter), which the key, an HMAC, does not tell. Empty:
	// not stored (an unknown version).
	Type, Version string
	RunID         string        // transport identity, for the history only
	Lease         time.Duration // how long the claim is exclusive
}

// ClaimResult is the ledger's decision on one ClaimRequest.
type ClaimResult struct {
	Outcome Outcome
	Key     Key // the key the receipt is stored under (may be an older key id)

	// With OutcomeClaimed:
	Token     int64 // fencing token: only its holder may finish the claim
	Attempt   int   // 1 for the first claim
	MaybeSent bool  // an earlier claim may have reached the provider: look up before sending
	// LeaseExpires is the lease's end on the caller's clock: the lease
	// from the caller's time of the call. The ledger records and enforces
	// it by its own clock, from its own (later) time of the call, so no
	// other run can take the claim over before it, whatever the caller's
	// clock. A send must end before it (see Ledger.Renew to extend it).
	LeaseExpires time.Time
	// TakenOverAt, with MaybeSent, is set when this claim took over an
	// expired claim whose send had started: the ledger's time of the
	// takeover, at or after the old lease's end. That send may still be
	// landing at the provider, so a look-up before TakenOverAt plus the
	// look-up delay could miss it. On the caller's clock, like every time
	// of a ClaimResult but SentAt (the ledger's record). Zero otherwise.
	TakenOverAt time.Time

	// With OutcomeAlreadySent:
	ProviderRef string
	SentAt      time.Time

	// With OutcomeNotDue (next attempt) and OutcomeBusy (lease expiry):
	NextAttempt time.Time
}

// Fence names one claim: its key and token.
type Fence struct {
	Key   Key
	Token int64
	// Week is the receipt's week (ClaimRequest.Week): with it, a ledger
	// partitioned by week reaches one partition. Zero: the ledger finds it.
	Week ISOWeek
}

// Finish records the end of one claim. Only the current token may finish.
type Finish struct {
	Key         Key
	Token       int64
	State       State     // StateSent, StateRetryable, StateFailed or StateHeld
	ProviderRef string    // with StateSent
	NextAttempt time.Time // with StateRetryable; on the caller's clock, kept by the ledger as the delay from its own time
	// MaybeSent, with StateRetryable, keeps the mark that the send may have
	// reached the provider, so the next claim looks up before sending.
	MaybeSent bool
	Reason    string // short, for the history; never customer data or secrets
	RunID     string
	Week      ISOWeek // as Fence.Week
	// AddressKey, with StateFailed, is the recipient's address key
	// (Keyring.AddressKey, an HMAC; never the address): the receipt keeps
	// it so that a bounce can be turned into a suppression.
	AddressKey string
}

// ErrStaleClaim means the token no longer holds the claim: its lease
// expired and another run took the key over. The caller must not send, and
// what it would have written is dropped.
var ErrStaleClaim = errors.New("stale claim: lease lost to a newer claim")

// ErrNotRenewed means a renewal skipped a claim because a concurrent write
// (this run recording it, or another run's claim deciding it) held its
// row: renewing never waits for a row lock, so that it cannot deadlock
// with the writes of its own run. The lease stands as it was; the next
// renewal tries again.
var ErrNotRenewed = errors.New("lease not renewed: the claim was being written")

// SnapshotPin names a snapshot: one (type, week, version).
type SnapshotPin struct {
	Type    string
	Week    ISOWeek
	Version string
}

// WeekPin is what the first run of a SnapshotPin fixes for every later run
// of it, so that a rerun computes the same keys and fingerprints.
type WeekPin struct {
	// AsOf is the snapshot cutoff: source rows recorded after it are not
	// part of the week.
	AsOf time.Time
	// Zone is the name of the time zone (time.Location.String) the week's
	// bounds are computed in: another zone moves them and so changes every
	// fingerprint.
	Zone string
	// KeyID is the key id new receipts of the week are created under, so
	// that runs with differently ordered keyrings never create two receipts
	// for one digest.
	KeyID string
	// Partial says the cutoff was taken before the week's end plus its
	// settle time on purpose (run --early-cutoff): activity recorded
	// after AsOf belongs to the week but is not in its digests.
	Partial bool
	// RepinnedFrom is where "digest repin" moved AsOf from; zero when the
	// pin was never moved. Read only (PinSnapshot ignores it in proposed).
	RepinnedFrom time.Time
	// ResentAsNewVersion is set on the pin of a version whose week was
	// already sent under another version of its type, and which a run
	// sent anyway on purpose (run --resend-as-new-version): who, why,
	// and what the week held under the other versions. Empty: no such
	// resend. PinSnapshot stores proposed's once, on a pin that has none;
	// later runs of the pin find it and need no flag again.
	ResentAsNewVersion string
	// ReceiptsByKeyID is filled on return only: the number of receipts of
	// the ISO week by key id, of every type and version: a key id stays
	// while any receipt uses it (and receipts made before migration 00020
	// do not say their type or version).
	ReceiptsByKeyID map[string]int64
}

// Observation is one key seen by an observe-mode run.
type Observation struct {
	Keys        []Key // candidates, current first, as in ClaimRequest
	Fingerprint string
	Week        ISOWeek
	RunID       string
}

// Observed is what the ledger reports for one Observation, without
// changing any receipt.
type Observed struct {
	// Would is what a claim would decide now (OutcomeClaimed for an absent
	// or claimable key).
	Would Outcome
	// PreviousAt is when the same key was last observed, or zero: the gap
	// is the "how soon do duplicates come" measure.
	PreviousAt time.Time
}

// Ledger is the receipt store the run loop needs. Batched methods take and
// return slices index by index, with the same semantics as one call per
// element; one call is one round trip or transaction where the store allows.
//
// Implementations are in package ledger (PostgreSQL and SQLite).
type Ledger interface {
	// PinSnapshot returns what pin fixes (as_of, zone, key id), storing
	// proposed (its AsOf, Zone and KeyID) if the pin is new. Every later
	// call returns the first stored values; a pin stored before zones and
	// key ids were pinned adopts proposed's Zone and KeyID once. The result's
	// ReceiptsByKeyID counts the week's receipts (see WeekPin).
	PinSnapshot(ctx context.Context, pin SnapshotPin, proposed WeekPin) (WeekPin, error)

	// StartWeek records that a run of pin starts at, which keeps every
	// receipt of the week from prune for the prune's horizon, and returns
	// the week's prune tombstone, or nil. A prune running at the same time
	// either sees the start and keeps the week, or finishes first and its
	// tombstone is returned.
	StartWeek(ctx context.Context, pin SnapshotPin, at time.Time) (*PruneTombstone, error)

	// Claim decides each request atomically: exactly one concurrent caller
	// gets OutcomeClaimed for a key. A fingerprint that differs from the
	// stored one quarantines the receipt (OutcomeQuarantined).
	Claim(ctx context.Context, reqs []ClaimRequest) ([]ClaimResult, error)

	// StartSending marks claims whose message is about to be handed to the
	// provider. A claim that crashes before this is re-sent by the next run
	// without a look-up; after it, the next claim reports MaybeSent. The
	// per-element error is ErrStaleClaim for a lost claim, which must not
	// be sent.
	StartSending(ctx context.Context, fences []Fence) ([]error, error)

	// Renew extends the leases of claims still held to lease from the
	// ledger's now, in one fenced statement, and returns the new expiry on
	// the caller's clock (lease from its time of the call, never later
	// than the ledger's). The per-element error is ErrStaleClaim for a claim another
	// run took over (or one already finished): it must not be sent; or
	// ErrNotRenewed for a claim whose row a concurrent write held: its
	// lease stands as it was. An expired lease that nobody took over is
	// renewed.
	Renew(ctx context.Context, fences []Fence, lease time.Duration) (expires time.Time, errs []error, err error)

	// Finish records outcomes; the per-element error is ErrStaleClaim when
	// the token no longer holds the claim.
	Finish(ctx context.Context, fs []Finish) ([]error, error)

	// Observe records observations (observe mode) and reports what a claim
	// would decide, changing no receipt.
	Observe(ctx context.Context, obs []Observation) ([]Observed, error)

	// SuppressionList: the run skips suppressed customers before claiming.
	SuppressionList
}

// VersionCounter counts what a week sent under each content version of a
// digest type, so that a run of a new version does not send the week a
// second time by accident (run.VersionResendError). Both ledger stores
// implement it.
type VersionCounter interface {
	// SentByVersion counts the receipts of week of type typ (or of an
	// unknown type: made before receipts stored it) that were sent or are
	// in flight, so may be sent yet (sent_at set, maybe sent, held,
	// claimed or retryable), by content version; "" counts those whose version is
	// unknown. It reads the week's receipts: the run asks only when the
	// week holds a pin of typ under another version.
	SentByVersion(ctx context.Context, week ISOWeek, typ string) (map[string]int64, error)
}

// ClaimEnder ends the claims no run will finish: a digest claimed (or
// left retryable) by a run that then crashed, whose customer is now
// suppressed or has nothing to send that week, is never claimed again
// (no run claims it), so without this its receipt stays claimed for ever.
// Both ledger stores implement it; the run calls it for the customers it
// does not claim.
type ClaimEnder interface {
	// EndClaims ends, for each request, the receipt of its week stored
	// under one of its candidate keys when no run can be finishing it: a
	// claim whose lease has expired, or a retryable receipt. One whose
	// send may have started (send_started, maybe_sent) ends held, for an
	// operator to look up, never closed as not sent; the rest end
	// failed. Either keeps the reason, with a history row. A live claim,
	// or a receipt in any other state, is left as it is. It returns the
	// receipts it ended, in one transaction.
	EndClaims(ctx context.Context, ends []EndClaim) ([]EndedClaim, error)
}

// WeekReceipts lists what a run needs to end the claims of customers no
// longer in the week's source (deleted, or out of the week): the week's
// unfinished receipts, and the pins of the week, since receipts store the
// week but not the digest type or content version. Both ledger stores
// implement it.
type WeekReceipts interface {
	// WeekKeys returns the keys of week's receipts in state, in key order,
	// after the key after ("" from the start), at most limit.
	WeekKeys(ctx context.Context, week ISOWeek, state State, after Key, limit int) ([]Key, error)
	// WeekPins returns every pin (type, version) of week, in no order.
	WeekPins(ctx context.Context, week ISOWeek) ([]SnapshotPin, error)
	// WeekUnfinished returns how many of week's receipts are claimed or
	// retryable (of any type and version), from counts the ledger keeps:
	// none, and no EndClaims can end anything of the week but what was
	// claimed since. A few rows read, whatever the size of the week.
	WeekUnfinished(ctx context.Context, week ISOWeek) (int64, error)
}

// EndClaim asks ClaimEnder to end the receipt of one digest.
type EndClaim struct {
	Keys   []Key   // the candidate keys (Keyring.Candidates), pinned key id first
	Week   ISOWeek // the receipt's week
	Reason string  // why no run will send it, e.g. "suppressed after claim"
	RunID  string  // the run that ends it, for the history
}

// EndedClaim is a receipt EndClaims ended: its key and its state before
// (claimed or retryable) and after (failed or held).
type EndedClaim struct {
	Key      Key
	From, To State
}
