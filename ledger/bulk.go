package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/weeklydigest/digest/digest"
)

// weekKeys returns the keys of a week's receipts in state, in key order.
// Rows that wait for review are few; they are read whole before any is
// changed, so that an action never pages through rows it is changing.
func weekKeys(ctx context.Context, s Store, week digest.ISOWeek, state digest.State) ([]digest.Key, error) {
	if week.IsZero() {
		return nil, fmt.Errorf("%w: a bulk action needs a week", ErrInvalid)
	}
	f := ListFilter{State: state, Week: week, Limit: 1000}
	var keys []digest.Key
	for {
		rs, err := s.List(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			keys = append(keys, r.Key)
		}
		if len(rs) < f.Limit {
			return keys, nil
		}
		f.After = rs[len(rs)-1].Key
	}
}

// BulkResult counts what a bulk action did to a week's receipts.
type BulkResult struct {
	Done       int // released, marked sent, or acknowledged
	MarkedSent int // release: found at the provider by the look-up, so marked sent instead
	NotFound   int // mark-sent: the provider has no such message; left held
	NotSent    int // acknowledge without unsent: not known to be sent (ErrNotSent); left for release
	Refused    int // release: maybe sent and no evidence it was not (ErrMaybeSent); left held
	Skipped    int // changed by someone else meanwhile (ErrWrongState, ErrWasSent): left alone
	Errors     int // mark-sent, release: the look-up could not tell; left held (release: counted in Refused too)
}

// Released is what ReleaseWithEvidence did to a receipt.
type Released int

const (
	ReleasedToSend  Released = iota // released: the next run sends it
	FoundAtProvider                 // the look-up found it: marked sent, not released
)

// ReleaseWithEvidence releases the receipt under key as Store.Release
// does, unless that could send the customer a second copy. Releasing a
// held receipt clears its maybe-sent mark, and the next run sends it
// without asking anyone: so a held receipt is first looked up at the
// provider when l is not nil. Found, it is marked sent under the
// provider's reference (FoundAtProvider; by's reason says the look-up
// found it). Not found, it is released. When there is no look-up, or it
// could not tell (lookupErr), the receipt is refused with ErrMaybeSent
// unless acceptDuplicates says the operator releases it knowing the
// customer may get the digest twice. A quarantined receipt keeps its mark
// when released (the next run looks it up itself) and is released as
// Store.Release does.
func ReleaseWithEvidence(ctx context.Context, s Store, key digest.Key, l digest.Lookup, acceptDuplicates bool, by Action) (_ Released, lookupErr, _ error) {
	r, _, err := s.Show(ctx, key)
	if err != nil {
		return 0, nil, err
	}
	maybeSent := r.State == digest.StateHeld && r.Sentness() == MaybeSent
	if maybeSent && l != nil {
		ref, found, err := l.Lookup(ctx, r.Key)
		switch {
		case err != nil && ctx.Err() != nil:
			return 0, nil, ctx.Err()
		case err != nil:
			lookupErr = err
		case found:
			by.Reason = "found at the provider by look-up; " + by.Reason
			return FoundAtProvider, nil, s.MarkSent(ctx, r.Key, ref, by)
		default:
			by.Reason = "not found at the provider by look-up; " + by.Reason
			return ReleasedToSend, nil, s.Release(ctx, r.Key, by)
		}
	}
	if maybeSent {
		if !acceptDuplicates && lookupErr != nil {
			return 0, lookupErr, fmt.Errorf("%w; the look-up could not tell: %v", ErrMaybeSent, lookupErr)
		}
		if !acceptDuplicates {
			return 0, nil, ErrMaybeSent
		}
		by.Reason = "released maybe sent, duplicates accepted; " + by.Reason
	}
	return ReleasedToSend, lookupErr, s.Release(ctx, r.Key, by)
}

// ReleaseWeek releases every receipt of week in state (held or
// quarantined) as ReleaseWithEvidence does, each with its own history
// event carrying by: a held one found by l is marked sent (MarkedSent),
// one maybe sent with no evidence is left held (Refused) unless
// acceptDuplicates. A receipt that changed state meanwhile is skipped, and
// a quarantined one that was sent stays quarantined (both counted
// Skipped).
func ReleaseWeek(ctx context.Context, s Store, week digest.ISOWeek, state digest.State, l digest.Lookup, acceptDuplicates bool, by Action) (BulkResult, error) {
	var res BulkResult
	if state != digest.StateHeld && state != digest.StateQuarantined {
		return res, fmt.Errorf("%w: release state %q: want held or quarantined", ErrInvalid, state)
	}
	keys, err := weekKeys(ctx, s, week, state)
	if err != nil {
		return res, err
	}
	for _, k := range keys {
		did, lookupErr, err := ReleaseWithEvidence(ctx, s, k, l, acceptDuplicates, by)
		if lookupErr != nil {
			res.Errors++
		}
		switch {
		case err == nil && did == FoundAtProvider:
			res.MarkedSent++
		case err == nil:
			res.Done++
		case errors.Is(err, ErrMaybeSent):
			res.Refused++
		case errors.Is(err, ErrWrongState) || errors.Is(err, ErrWasSent) || errors.Is(err, ErrNotFound):
			res.Skipped++
		default:
			return res, err
		}
	}
	return res, nil
}

// AcknowledgeWeek acknowledges every receipt of week in state (held or
// quarantined), each as Acknowledge does and with its own history event
// carrying by. One not known to be sent is left as it is unless unsent
// (counted NotSent); one that changed state meanwhile is skipped.
func AcknowledgeWeek(ctx context.Context, s Store, week digest.ISOWeek, state digest.State, unsent bool, by Action) (BulkResult, error) {
	var res BulkResult
	if state != digest.StateHeld && state != digest.StateQuarantined {
		return res, fmt.Errorf("%w: acknowledge state %q: want held or quarantined", ErrInvalid, state)
	}
	keys, err := weekKeys(ctx, s, week, state)
	if err != nil {
		return res, err
	}
	for _, k := range keys {
		err := s.Acknowledge(ctx, k, unsent, by)
		switch {
		case err == nil:
			res.Done++
		case errors.Is(err, ErrNotSent):
			res.NotSent++
		case errors.Is(err, ErrWrongState) || errors.Is(err, ErrNotFound):
			res.Skipped++
		default:
			return res, err
		}
	}
	return res, nil
}

// MarkSentFromProvider asks l about every held receipt of week and marks
// sent, under the provider's reference, each one the provider has; it
// leaves the others held (counted NotFound, or Errors when the look-up
// could not tell). Each marked receipt's history carries by and says it was
// found by the look-up.
func MarkSentFromProvider(ctx context.Context, s Store, week digest.ISOWeek, l digest.Lookup, by Action) (BulkResult, error) {
	var res BulkResult
	if l == nil {
		return res, fmt.Errorf("%w: no look-up", ErrInvalid)
	}
	keys, err := weekKeys(ctx, s, week, digest.StateHeld)
	if err != nil {
		return res, err
	}
	by.Reason = "found at the provider by look-up; " + by.Reason
	for _, k := range keys {
		ref, found, err := l.Lookup(ctx, k)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			res.Errors++
			continue
		case !found:
			res.NotFound++
			continue
		}
		err = s.MarkSent(ctx, k, ref, by)
		switch {
		case err == nil:
			res.Done++
		case errors.Is(err, ErrWrongState) || errors.Is(err, ErrNotFound):
			res.Skipped++
		default:
			return res, err
		}
	}
	return res, nil
}
