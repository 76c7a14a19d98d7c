package ledger

import (
	"slices"
	"strings"

	"github.com/weeklydigest/digest/digest"
)

// The history texts: the detail of each receipt_events row a store writes
// for a transition it makes itself. They are defined here once; the SQLite
// store writes them from Go and the PostgreSQL statements receive them as
// arguments. A Finish's detail is FinishDetail, an
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

// QuarantineDetail is the history text of a quarantine: HistoryQuarantined
// and which parts changed (digest.ChangedParts of the stored and the
// claimed FingerprintParts), never their values. The PostgreSQL claim
// statement writes the same text.
func QuarantineDetail(stored, claimed string) string {
	changed := digest.ChangedParts(stored, claimed)
	switch {
	case claimed == "":
		return HistoryQuarantined // the claim told no parts (a caller without a keyring)
	case stored == "":
		return HistoryQuarantined + HistoryPartsUnknown
	case len(changed) == 0:
		return HistoryQuarantined + HistoryPartsChanged + HistoryPartsOther
	}
	return HistoryQuarantined + HistoryPartsChanged + strings.Join(changed, ", ")
}

// The texts QuarantineDetail appends to HistoryQuarantined.
const (
	HistoryPartsUnknown = "; which part changed is not recorded" // a receipt claimed before its parts were kept, or released from quarantine
	HistoryPartsChanged = "; changed: "                          // then the parts' names (digest.PartNames), or HistoryPartsOther
	HistoryPartsOther   = "another field"                        // no part's check differs
)

// ReleasedFromQuarantine is the history text, in Action.Detail, of the
// Release of a quarantined receipt that adopts fingerprint.
func ReleasedFromQuarantine(fingerprint string) string {
	return "released from quarantine; fingerprint " + fingerprint + " adopted"
}

// Acknowledged is the history text, in Action.Detail, of the Acknowledge
// of a receipt whose message was as s says: sent, or (with unsent) not
// sent or maybe sent, which the operator closes knowingly.
func Acknowledged(s Sentness) string {
	if s == Sent {
		return "acknowledged (sent); never sent again"
	}
	return "acknowledged (" + string(s) + "), closed knowingly; never sent again"
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

// MarkSentDetail is the history text of an operator's MarkSent.
func MarkSentDetail(by Action, providerRef string) string {
	return by.Detail("marked sent as " + providerRef)
}

// ReceiptStory is the history Show presents: the stored rows with the
// happy path's events, which no row holds, told from the receipt's
// columns (FromReceipt set, ID 0):
//   - the first claim (absent → claimed) at first_claimed_at, under
//     run_id, or first_run_id once a later claim replaced run_id;
//   - the latest send start (claimed → claimed, HistorySendStarted) at
//     send_started_at; an earlier start that a later one replaced has a
//     row of its own, written by that later StartSending without a run
//     id, which is told as the run of the claim in force at that time;
//   - the finish to sent at sent_at with provider_ref, unless a row
//     records the move to sent (an operator's mark-sent, a Finish with a
//     reason).
//
// Events are in time order (rows of equal times in the order written);
// each told event goes right after the last claim (claimed or taken over)
// at or before its time. A provider's note (IsProviderNote) is kept in
// its time's place and tells no transition. Rows written before the ledger stopped writing
// these (migration 00005) already tell them; nothing is told twice.
func ReceiptStory(r Receipt, rows []Event) []Event {
	var created, sent, replaced, startRow bool
	for _, e := range rows {
		if IsProviderNote(e) {
			continue // a provider's report, not a transition
		}
		created = created || e.From == absentState
		sent = sent || e.To == digest.StateSent
		replaced = replaced || e.To == digest.StateClaimed || e.To == digest.StateQuarantined
		startRow = startRow || e.Detail == HistorySendStarted && e.At.Equal(r.SendStartedAt)
	}
	out := make([]Event, 0, len(rows)+3)
	if !created && !r.FirstClaimed.IsZero() {
		run := r.FirstRunID // set once a later claim replaced run_id
		if run == "" && !replaced {
			run = r.RunID
		}
		out = append(out, Event{Key: r.Key, At: r.FirstClaimed, To: digest.StateClaimed, RunID: run,
			Detail: HistoryClaimed, FromReceipt: true})
	}
	out = append(out, rows...)
	// By time: the row of a replaced send start is written later than
	// the takeover or retry before it, at the start's own time.
	slices.SortStableFunc(out, func(a, b Event) int { return a.At.Compare(b.At) })
	// Such a row has no run id (the replaced claim's run id is gone by
	// then): it is the run of the claim in force at the start.
	run := ""
	for i, e := range out {
		if IsProviderNote(e) {
			continue
		}
		if e.To == digest.StateClaimed && e.Detail != HistorySendStarted {
			run = e.RunID
		} else if e.Detail == HistorySendStarted && e.RunID == "" {
			out[i].RunID = run
		}
	}
	tell := func(e Event) {
		at := len(out)
		for i := len(out) - 1; i >= 0; i-- {
			if out[i].To == digest.StateClaimed && !IsProviderNote(out[i]) && !out[i].At.After(e.At) {
				at = i + 1
				if e.RunID == "" {
					e.RunID = out[i].RunID
				}
				break
			}
		}
		out = append(out[:at], append([]Event{e}, out[at:]...)...)
	}
	if !r.SendStartedAt.IsZero() && !startRow {
		tell(Event{Key: r.Key, At: r.SendStartedAt, From: digest.StateClaimed, To: digest.StateClaimed,
			Detail: HistorySendStarted, FromReceipt: true})
	}
	if !r.SentAt.IsZero() && !sent {
		run := ""
		if r.State == digest.StateSent {
			run = r.RunID // the finish's run: nothing after it changes the run id
		}
		tell(Event{Key: r.Key, At: r.SentAt, From: digest.StateClaimed, To: digest.StateSent, RunID: run,
			Detail: FinishDetail(digest.Finish{State: digest.StateSent, ProviderRef: r.ProviderRef}), FromReceipt: true})
	}
	return out
}
