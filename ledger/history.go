package ledger

import "github.com/weeklydigest/digest/digest"

// The history texts: the detail of each receipt_events row a store writes
// for a transition it makes itself. They are defined here once; the SQLite
// store writes them from Go and the PostgreSQL statements receive them as
// arguments (see ClaimHistoryTexts). A Finish's detail is FinishDetail, an
// operator's Action.Detail.
const (
	HistoryClaimed      = "claimed"                                         // a new receipt
	HistoryClaimedAgain = "claimed again"                                   // a due retryable receipt
	HistoryTakenOver    = "lease expired; taken over"                       // a claim whose lease ran out
	HistoryMaybeSent    = "; an earlier send may have reached the provider" // appended to the two above when MaybeSent
	HistoryQuarantined  = "fingerprint differs from the stored one"         // a claim with another fingerprint
	HistorySendStarted  = "send started"                                    // StartSending
	HistoryReleased     = "released for resend"                             // Release of a held receipt, in Action.Detail
)

// ReleasedFromQuarantine is the history text, in Action.Detail, of the
// Release of a quarantined receipt that adopts fingerprint.
func ReleasedFromQuarantine(fingerprint string) string {
	return "released from quarantine; fingerprint " + fingerprint + " adopted"
}

// ClaimHistory is the history text of a claim that moved a receipt from
// from ("" for a new receipt) to to.
func ClaimHistory(from, to digest.State, maybeSent bool) string {
	var text string
	switch {
	case to == digest.StateQuarantined:
		return HistoryQuarantined
	case from == "":
		text = HistoryClaimed
	case from == digest.StateClaimed:
		text = HistoryTakenOver
	default:
		text = HistoryClaimedAgain
	}
	if maybeSent {
		text += HistoryMaybeSent
	}
	return text
}

// ClaimHistoryTexts are the arguments the PostgreSQL claim statements take
// for their history rows, in order: quarantined, claimed, taken over,
// claimed again, the maybe-sent suffix.
func ClaimHistoryTexts() []any {
	return []any{HistoryQuarantined, HistoryClaimed, HistoryTakenOver, HistoryClaimedAgain, HistoryMaybeSent}
}

// MarkSentDetail is the history text of an operator's MarkSent.
func MarkSentDetail(by Action, providerRef string) string {
	return by.Detail("marked sent as " + providerRef)
}
