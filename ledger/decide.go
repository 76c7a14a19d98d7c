package ledger

import (
	"fmt"

	"github.com/weeklydigest/digest/digest"
)

// finishDetail is the history line of a Finish.
func FinishDetail(f digest.Finish) string {
	if f.State == digest.StateSent && f.ProviderRef != "" {
		if f.Reason == "" {
			return "provider ref " + f.ProviderRef
		}
		return f.Reason + "; provider ref " + f.ProviderRef
	}
	return f.Reason
}

// release decides what Release does to r: from quarantine (adopting the
// conflicting fingerprint) or from held; the error refuses it.
func DecideRelease(r Receipt, by Action) (fromQuarantine bool, detail string, err error) {
	switch {
	case r.State == digest.StateHeld:
		return false, by.Detail(HistoryReleased), nil
	case r.State == digest.StateQuarantined && !r.SentAt.IsZero():
		return false, "", ErrWasSent
	case r.State == digest.StateQuarantined:
		return true, by.Detail(ReleasedFromQuarantine(r.ConflictFingerprint)), nil
	}
	return false, "", fmt.Errorf("%w: %s", ErrWrongState, r.State)
}

// DecideAcknowledge decides what Acknowledge does to r: the history text
// of the move to acknowledged, or the error that refuses it.
func DecideAcknowledge(r Receipt, unsent bool, by Action) (detail string, err error) {
	if r.State != digest.StateQuarantined && r.State != digest.StateHeld {
		return "", fmt.Errorf("%w: %s", ErrWrongState, r.State)
	}
	if r.Sentness() == Sent {
		return by.Detail(Acknowledged(Sent)), nil
	}
	if !unsent {
		return "", fmt.Errorf("%w (%s)", ErrNotSent, r.Sentness())
	}
	return by.Detail(Acknowledged(r.Sentness())), nil
}
