package ledger

import "github.com/weeklydigest/digest/digest"

// Trigger is a call that may move a receipt from one state to another.
type Trigger string

// The triggers. Claims come from runs (digest.Ledger.Claim); the fenced
// events from the run holding the claim, with its token; the rest from an
// operator (Store).
const (
	TriggerClaim                   Trigger = "claim"                          // Claim with the stored fingerprint
	TriggerClaimOtherFingerprint   Trigger = "claim with another fingerprint" // Claim whose fingerprint differs from the stored one
	TriggerStartSending            Trigger = "start sending"                  // StartSending
	TriggerRenew                   Trigger = "renew"                          // Renew: the lease runs on; no history row
	TriggerFinishSent              Trigger = "finish sent"                    // Finish, State sent
	TriggerFinishRetryable         Trigger = "finish retryable"               // Finish, State retryable
	TriggerFinishFailed            Trigger = "finish failed"                  // Finish, State failed
	TriggerFinishHeld              Trigger = "finish held"                    // Finish, State held
	TriggerRelease                 Trigger = "release"                        // Release
	TriggerMarkSent                Trigger = "mark sent"                      // MarkSent
	TriggerAcknowledge             Trigger = "acknowledge"                    // Acknowledge of a receipt that was sent
	TriggerAcknowledgeUnsent       Trigger = "acknowledge naming unsent"      // Acknowledge with unsent: also one not known to be sent
	TriggerPrune                   Trigger = "prune"                          // Prune past the receipt's last update
	TriggerPruneHeldAndQuarantined Trigger = "prune naming held and quarantined"
	// TriggerEndClaim: digest.ClaimEnder.EndClaims, by a run that will not
	// send the digest (its customer suppressed, nothing to send).
	TriggerEndClaim Trigger = "end claim no run will send"
)

// Triggers lists every trigger, in the order of the state diagram.
var Triggers = []Trigger{
	TriggerClaim, TriggerClaimOtherFingerprint, TriggerStartSending, TriggerRenew,
	TriggerFinishSent, TriggerFinishRetryable, TriggerFinishFailed, TriggerFinishHeld,
	TriggerRelease, TriggerMarkSent, TriggerAcknowledge, TriggerAcknowledgeUnsent,
	TriggerPrune, TriggerPruneHeldAndQuarantined, TriggerEndClaim,
}

// Actor is who may cause a transition.
type Actor string

const (
	ActorRun      Actor = "a run"            // any run claiming the digest
	ActorHolder   Actor = "the claim holder" // the run whose token still fences the receipt
	ActorOperator Actor = "an operator"      // digest review release, mark-sent, acknowledge; prune
)

// Condition narrows a state: a transition that names one happens only
// under it.
type Condition string

const (
	Always       Condition = ""
	LeaseExpired Condition = "lease expired" // claimed, lease_expires_at <= now
	Due          Condition = "due"           // retryable, next_attempt_at <= now
	NeverSent    Condition = "never sent"    // quarantined, no sent_at
	WasSent      Condition = "was sent"      // quarantined after it was sent (sent_at set)
	NotRunSince  Condition = "not run since" // last updated before the cutoff, its week not run since
	SendStarted  Condition = "send started"  // claimed, StartSending called (used by the walk only)
	LeaseLive    Condition = "lease live"    // claimed, lease not yet expired (used by the walk only)
	NotDue       Condition = "not due"       // retryable, before next_attempt_at (used by the walk only)
	StartExpired Condition = "start expired" // claimed, its send started, lease expired
	MayBeSent    Condition = "maybe sent"    // retryable, an earlier send may have reached the provider
)

// absentState is the From or To of a transition that has no receipt.
const absentState digest.State = ""

// Row is how a transition enters a receipt's history.
type Row string

const (
	// RowWritten: the store writes a history row (receipt_events).
	RowWritten Row = "row"
	// RowTold: no row; the receipt's own columns record the transition
	// and Show tells it from them (ReceiptStory). The happy path: the
	// first claim, the send start, the finish to sent.
	RowTold Row = "told by the receipt"
	// RowNone: nothing: a renewal is not a change of state, and a prune
	// removes the history with the receipt.
	RowNone Row = "none"
)

// Transition is one edge of the state diagram: From (empty: no receipt)
// under When, Trigger moves the receipt to To (empty: removed), caused by
// By, and enters the history as Row says, saying History (see the
// History* constants; empty: the text depends on the request, as
// FinishDetail and Action.Detail make it, or there is no history entry).
type Transition struct {
	From    digest.State
	When    Condition
	Trigger Trigger
	To      digest.State
	By      Actor
	Row     Row
	History string
}

// HistoryPruneEnded is the history of a claim (or retryable receipt) a
// prune ended before deleting (EndStaleClaims): not its own edge in time,
// the receipt's week being older than the prune's cutoff (NotRunSince).
const HistoryPruneEnded = PruneEndReason

// Transitions is the state diagram: every (state, trigger) pair not listed
// leaves the receipt as it is (a claim reports why; a fenced call gets
// digest.ErrStaleClaim; an operator action ErrWrongState, ErrWasSent or
// ErrNotFound) and writes no history. The package doc draws it; the
// contract suite (ledgertest) walks every state × trigger on each store.
var Transitions = []Transition{
	{absentState, Always, TriggerClaim, digest.StateClaimed, ActorRun, RowTold, HistoryClaimed},
	{absentState, Always, TriggerClaimOtherFingerprint, digest.StateClaimed, ActorRun, RowTold, HistoryClaimed},
	{digest.StateClaimed, LeaseExpired, TriggerClaim, digest.StateClaimed, ActorRun, RowWritten, HistoryTakenOver},
	{digest.StateRetryable, Due, TriggerClaim, digest.StateClaimed, ActorRun, RowWritten, HistoryClaimedAgain},
	{digest.StateClaimed, Always, TriggerStartSending, digest.StateClaimed, ActorHolder, RowTold, HistorySendStarted},
	{digest.StateClaimed, Always, TriggerRenew, digest.StateClaimed, ActorHolder, RowNone, ""},
	{digest.StateClaimed, Always, TriggerFinishSent, digest.StateSent, ActorHolder, RowTold, ""},
	{digest.StateClaimed, Always, TriggerFinishRetryable, digest.StateRetryable, ActorHolder, RowWritten, ""},
	{digest.StateClaimed, Always, TriggerFinishFailed, digest.StateFailed, ActorHolder, RowWritten, ""},
	{digest.StateClaimed, Always, TriggerFinishHeld, digest.StateHeld, ActorHolder, RowWritten, ""},
	{digest.StateClaimed, Always, TriggerClaimOtherFingerprint, digest.StateQuarantined, ActorRun, RowWritten, HistoryQuarantined},
	{digest.StateSent, Always, TriggerClaimOtherFingerprint, digest.StateQuarantined, ActorRun, RowWritten, HistoryQuarantined},
	{digest.StateRetryable, Always, TriggerClaimOtherFingerprint, digest.StateQuarantined, ActorRun, RowWritten, HistoryQuarantined},
	{digest.StateFailed, Always, TriggerClaimOtherFingerprint, digest.StateQuarantined, ActorRun, RowWritten, HistoryQuarantined},
	{digest.StateHeld, Always, TriggerClaimOtherFingerprint, digest.StateQuarantined, ActorRun, RowWritten, HistoryQuarantined},
	{digest.StateHeld, Always, TriggerRelease, digest.StateRetryable, ActorOperator, RowWritten, ""},
	{digest.StateHeld, Always, TriggerMarkSent, digest.StateSent, ActorOperator, RowWritten, ""},
	{digest.StateQuarantined, NeverSent, TriggerRelease, digest.StateRetryable, ActorOperator, RowWritten, ""},
	{digest.StateQuarantined, WasSent, TriggerAcknowledge, digest.StateAcknowledged, ActorOperator, RowWritten, ""},
	{digest.StateQuarantined, Always, TriggerAcknowledgeUnsent, digest.StateAcknowledged, ActorOperator, RowWritten, ""},
	{digest.StateHeld, Always, TriggerAcknowledgeUnsent, digest.StateAcknowledged, ActorOperator, RowWritten, ""},
	{digest.StateSent, NotRunSince, TriggerPrune, absentState, ActorOperator, RowNone, ""},
	{digest.StateFailed, NotRunSince, TriggerPrune, absentState, ActorOperator, RowNone, ""},
	{digest.StateAcknowledged, NotRunSince, TriggerPrune, absentState, ActorOperator, RowNone, ""},
	{digest.StateSent, NotRunSince, TriggerPruneHeldAndQuarantined, absentState, ActorOperator, RowNone, ""},
	{digest.StateFailed, NotRunSince, TriggerPruneHeldAndQuarantined, absentState, ActorOperator, RowNone, ""},
	{digest.StateAcknowledged, NotRunSince, TriggerPruneHeldAndQuarantined, absentState, ActorOperator, RowNone, ""},
	{digest.StateHeld, NotRunSince, TriggerPruneHeldAndQuarantined, absentState, ActorOperator, RowNone, ""},
	{digest.StateQuarantined, NotRunSince, TriggerPruneHeldAndQuarantined, absentState, ActorOperator, RowNone, ""},
	{digest.StateClaimed, StartExpired, TriggerPrune, digest.StateHeld, ActorOperator, RowWritten, HistoryPruneEnded},
	{digest.StateClaimed, LeaseExpired, TriggerPrune, digest.StateFailed, ActorOperator, RowWritten, HistoryPruneEnded},
	{digest.StateRetryable, MayBeSent, TriggerPrune, digest.StateHeld, ActorOperator, RowWritten, HistoryPruneEnded},
	{digest.StateRetryable, Always, TriggerPrune, digest.StateFailed, ActorOperator, RowWritten, HistoryPruneEnded},
	{digest.StateClaimed, StartExpired, TriggerPruneHeldAndQuarantined, digest.StateHeld, ActorOperator, RowWritten, HistoryPruneEnded},
	{digest.StateClaimed, LeaseExpired, TriggerPruneHeldAndQuarantined, digest.StateFailed, ActorOperator, RowWritten, HistoryPruneEnded},
	{digest.StateRetryable, MayBeSent, TriggerPruneHeldAndQuarantined, digest.StateHeld, ActorOperator, RowWritten, HistoryPruneEnded},
	{digest.StateRetryable, Always, TriggerPruneHeldAndQuarantined, digest.StateFailed, ActorOperator, RowWritten, HistoryPruneEnded},
	{digest.StateClaimed, StartExpired, TriggerEndClaim, digest.StateHeld, ActorRun, RowWritten, ""},
	{digest.StateClaimed, LeaseExpired, TriggerEndClaim, digest.StateFailed, ActorRun, RowWritten, ""},
	{digest.StateRetryable, MayBeSent, TriggerEndClaim, digest.StateHeld, ActorRun, RowWritten, ""},
	{digest.StateRetryable, Always, TriggerEndClaim, digest.StateFailed, ActorRun, RowWritten, ""},
}

// Next returns the transition that trigger causes from a receipt in state
// from (empty: none) of which the conditions holds are true, and false when
// the receipt stays as it is.
func Next(from digest.State, holds []Condition, trigger Trigger) (Transition, bool) {
	for _, tr := range Transitions {
		if tr.From != from || tr.Trigger != trigger {
			continue
		}
		if tr.When == Always {
			return tr, true
		}
		for _, c := range holds {
			if c == tr.When {
				return tr, true
			}
		}
	}
	return Transition{}, false
}
