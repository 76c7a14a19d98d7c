package ledger

import (
	"fmt"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// current is the part of a stored receipt a claim decides on.
type current struct {
	key          digest.Key
	state        digest.State
	fingerprint  string
	attempts     int
	token        int64
	leaseExpires time.Time
	nextAttempt  time.Time
	sentAt       time.Time
	providerRef  string
	maybeSent    bool
	sendStarted  bool
	// takenOver: this claim took over an expired claim and the receipt is
	// maybe sent (see digest.ClaimResult.TakenOverAt).
	takenOver bool
}

// claimable reports whether a request with the stored fingerprint may take
// c over at now: a due retryable row, or a claimed row whose lease expired.
func (c *current) claimable(now time.Time) bool {
	switch c.state {
	case digest.StateRetryable:
		return !now.Before(c.nextAttempt)
	case digest.StateClaimed:
		return !now.Before(c.leaseExpires)
	}
	return false
}

// report is the outcome for a receipt this call did not change. A row that
// looks claimable here lost a race to another claim: Busy, never Claimed.
func report(c *current, fingerprint string, now time.Time) digest.ClaimResult {
	res := digest.ClaimResult{Key: c.key}
	switch {
	case c.state == digest.StateQuarantined || c.fingerprint != fingerprint:
		res.Outcome = digest.OutcomeQuarantined
	case c.state == digest.StateSent:
		res.Outcome = digest.OutcomeAlreadySent
		res.ProviderRef, res.SentAt = c.providerRef, c.sentAt
	case c.state == digest.StateFailed:
		res.Outcome = digest.OutcomeFailed
	case c.state == digest.StateHeld:
		res.Outcome = digest.OutcomeHeld
	case c.state == digest.StateRetryable && now.Before(c.nextAttempt):
		res.Outcome = digest.OutcomeNotDue
		res.NextAttempt = c.nextAttempt
	default:
		res.Outcome = digest.OutcomeBusy
		res.NextAttempt = c.leaseExpires
		if c.state == digest.StateRetryable {
			res.NextAttempt = c.nextAttempt
		}
	}
	return res
}

// claimed is the result for a row this call has just claimed at now.
func claimed(c *current, now time.Time) digest.ClaimResult {
	res := digest.ClaimResult{
		Outcome:      digest.OutcomeClaimed,
		Key:          c.key,
		Token:        c.token,
		Attempt:      c.attempts,
		MaybeSent:    c.maybeSent,
		LeaseExpires: c.leaseExpires,
	}
	if c.takenOver {
		res.TakenOverAt = now
	}
	return res
}

// would is what a claim would decide now, for observe mode.
func would(c *current, fingerprint string, now time.Time) digest.Outcome {
	if c == nil || c.fingerprint == fingerprint && c.claimable(now) {
		return digest.OutcomeClaimed
	}
	return report(c, fingerprint, now).Outcome
}

// validateKeys checks that every key has the stored form KID:HEX: nothing
// readable (an identity by mistake) ever becomes a receipt key, and no key
// holds the ',' the PostgreSQL statements use as a separator.
func validateKeys(keys []digest.Key) error {
	for _, k := range keys {
		if _, err := digest.ParseKey(string(k)); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	return nil
}

func validateClaims(reqs []digest.ClaimRequest) error {
	for i, r := range reqs {
		if err := validateKeys(r.Keys); err != nil {
			return err
		}
		switch {
		case len(r.Keys) == 0:
			return fmt.Errorf("%w: claim %d: no keys", ErrInvalid, i)
		case r.Fingerprint == "":
			return fmt.Errorf("%w: claim %s: empty fingerprint", ErrInvalid, r.Keys[0])
		case r.Lease <= 0:
			return fmt.Errorf("%w: claim %s: lease must be positive", ErrInvalid, r.Keys[0])
		case r.Week.IsZero():
			return fmt.Errorf("%w: claim %s: week is missing", ErrInvalid, r.Keys[0])
		}
	}
	return nil
}

func validateFinishes(fs []digest.Finish) error {
	for _, f := range fs {
		switch f.State {
		case digest.StateSent, digest.StateRetryable, digest.StateFailed, digest.StateHeld:
		default:
			return fmt.Errorf("%w: finish %s: state %q is not sent, retryable, failed or held", ErrInvalid, f.Key, f.State)
		}
	}
	return nil
}

func validateObservations(obs []digest.Observation) error {
	for i, o := range obs {
		if len(o.Keys) == 0 {
			return fmt.Errorf("%w: observation %d: no keys", ErrInvalid, i)
		}
		if err := validateKeys(o.Keys); err != nil {
			return err
		}
	}
	return nil
}

// finishDetail is the history line of a Finish.
func finishDetail(f digest.Finish) string {
	if f.State == digest.StateSent && f.ProviderRef != "" {
		if f.Reason == "" {
			return "provider ref " + f.ProviderRef
		}
		return f.Reason + "; provider ref " + f.ProviderRef
	}
	return f.Reason
}

// nextAttempt is f's next attempt time, now when unset.
func nextAttempt(f digest.Finish, now time.Time) time.Time {
	if f.NextAttempt.IsZero() {
		return now
	}
	return f.NextAttempt
}

func keyStrings(keys []digest.Key) []string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = string(k)
	}
	return s
}

// release decides what Release does to r: from quarantine (adopting the
// conflicting fingerprint) or from held; the error refuses it.
func release(r Receipt, by Action) (fromQuarantine bool, detail string, err error) {
	switch {
	case r.State == digest.StateHeld:
		return false, by.detail("released for resend"), nil
	case r.State == digest.StateQuarantined && !r.SentAt.IsZero():
		return false, "", ErrWasSent
	case r.State == digest.StateQuarantined:
		return true, by.detail("released from quarantine; fingerprint " + r.ConflictFingerprint + " adopted"), nil
	}
	return false, "", fmt.Errorf("%w: %s", ErrWrongState, r.State)
}
