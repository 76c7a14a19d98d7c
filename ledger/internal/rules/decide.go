// Package rules is what both ledger stores (ledger/postgres, ledger/sqlite)
// apply alike and no caller of a store needs: the claim decision on a
// stored receipt, the validation of requests, the encodings of values in
// their statements and the classification of their errors. Package ledger
// holds the API callers use.
package rules

import (
	"fmt"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// Stored is the part of a stored receipt a claim decides on.
type Stored struct {
	Key          digest.Key
	State        digest.State
	Fingerprint  string
	Attempts     int
	Token        int64
	LeaseExpires time.Time
	NextAttempt  time.Time
	SentAt       time.Time
	ProviderRef  string
	MaybeSent    bool
	SendStarted  bool
	// TakenOver: this claim took over an expired claim and the receipt is
	// maybe sent (see digest.ClaimResult.TakenOverAt).
	TakenOver bool
}

// Claimable reports whether a request with the stored fingerprint may take
// c over at now: a due retryable row, or a claimed row whose lease expired.
func (c *Stored) Claimable(now time.Time) bool {
	switch c.State {
	case digest.StateRetryable:
		return !now.Before(c.NextAttempt)
	case digest.StateClaimed:
		return !now.Before(c.LeaseExpires)
	}
	return false
}

// Unclaimed is the outcome for a receipt this call did not change. A row that
// looks claimable here lost a race to another claim: Busy, never Claimed.
func Unclaimed(c *Stored, fingerprint string, now time.Time) digest.ClaimResult {
	res := digest.ClaimResult{Key: c.Key}
	switch {
	// Acknowledged is final whatever the fingerprint: an operator closed
	// it, so no run quarantines it again or counts it for review.
	case c.State == digest.StateAcknowledged && !c.SentAt.IsZero():
		res.Outcome = digest.OutcomeAlreadySent
		res.ProviderRef, res.SentAt = c.ProviderRef, c.SentAt
	case c.State == digest.StateAcknowledged:
		res.Outcome = digest.OutcomeFailed // closed unsent: never retried automatically
	case c.State == digest.StateQuarantined || c.Fingerprint != fingerprint:
		res.Outcome = digest.OutcomeQuarantined
	case c.State == digest.StateSent:
		res.Outcome = digest.OutcomeAlreadySent
		res.ProviderRef, res.SentAt = c.ProviderRef, c.SentAt
	case c.State == digest.StateFailed:
		res.Outcome = digest.OutcomeFailed
	case c.State == digest.StateHeld:
		res.Outcome = digest.OutcomeHeld
	case c.State == digest.StateRetryable && now.Before(c.NextAttempt):
		res.Outcome = digest.OutcomeNotDue
		res.NextAttempt = c.NextAttempt
	default:
		res.Outcome = digest.OutcomeBusy
		res.NextAttempt = c.LeaseExpires
		if c.State == digest.StateRetryable {
			res.NextAttempt = c.NextAttempt
		}
	}
	return res
}

// Claimed is the result for a row this call has just claimed at now.
func Claimed(c *Stored, now time.Time) digest.ClaimResult {
	res := digest.ClaimResult{
		Outcome:      digest.OutcomeClaimed,
		Key:          c.Key,
		Token:        c.Token,
		Attempt:      c.Attempts,
		MaybeSent:    c.MaybeSent,
		LeaseExpires: c.LeaseExpires,
	}
	if c.TakenOver {
		res.TakenOverAt = now
	}
	return res
}

// ObservedOutcome is what a claim would decide now, for observe mode.
func ObservedOutcome(c *Stored, fingerprint string, now time.Time) digest.Outcome {
	if c == nil || c.Fingerprint == fingerprint && c.Claimable(now) {
		return digest.OutcomeClaimed
	}
	return Unclaimed(c, fingerprint, now).Outcome
}

// validateKeys checks that every key has the stored form KID:HEX: nothing
// readable (an identity by mistake) ever becomes a receipt key, and no key
// holds the ',' the PostgreSQL statements use as a separator.
func validateKeys(keys []digest.Key) error {
	for _, k := range keys {
		if _, err := digest.ParseKey(string(k)); err != nil {
			return fmt.Errorf("%w: %w", ledger.ErrInvalid, err)
		}
	}
	return nil
}

// ValidateClaims refuses malformed claim requests with ledger.ErrInvalid.
func ValidateClaims(reqs []digest.ClaimRequest) error {
	for i, r := range reqs {
		if err := validateKeys(r.Keys); err != nil {
			return err
		}
		switch {
		case len(r.Keys) == 0:
			return fmt.Errorf("%w: claim %d: no keys", ledger.ErrInvalid, i)
		case r.Fingerprint == "":
			return fmt.Errorf("%w: claim %s: empty fingerprint", ledger.ErrInvalid, r.Keys[0])
		case r.Lease <= 0:
			return fmt.Errorf("%w: claim %s: lease must be positive", ledger.ErrInvalid, r.Keys[0])
		case r.Week.IsZero():
			return fmt.Errorf("%w: claim %s: week is missing", ledger.ErrInvalid, r.Keys[0])
		}
	}
	return nil
}

// ValidateFinishes refuses a Finish to a state a claim cannot end in.
func ValidateFinishes(fs []digest.Finish) error {
	for _, f := range fs {
		switch f.State {
		case digest.StateSent, digest.StateRetryable, digest.StateFailed, digest.StateHeld:
		default:
			return fmt.Errorf("%w: finish %s: state %q is not sent, retryable, failed or held", ledger.ErrInvalid, f.Key, f.State)
		}
	}
	return nil
}

// ValidateObservations refuses malformed observations with ledger.ErrInvalid.
func ValidateObservations(obs []digest.Observation) error {
	for i, o := range obs {
		if len(o.Keys) == 0 {
			return fmt.Errorf("%w: observation %d: no keys", ledger.ErrInvalid, i)
		}
		if err := validateKeys(o.Keys); err != nil {
			return err
		}
	}
	return nil
}

// FinishWritesHistory reports whether a Finish writes a history row. A
// Finish to sent without a reason writes none: the receipt's sent_at and
// provider_ref say all the row would (ledger.ReceiptStory tells it from them).
func FinishWritesHistory(f digest.Finish) bool {
	return f.State != digest.StateSent || f.Reason != ""
}
