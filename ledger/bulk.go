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
	Done     int // released, marked sent, or acknowledged
	NotFound int // mark-sent: the provider has no such message; left held
	NotSent  int // acknowledge without unsent: not known to be sent (ErrNotSent); left for release
	Skipped  int // changed by someone else meanwhile (ErrWrongState, ErrWasSent): left alone
	Errors   int // mark-sent: the look-up could not tell; left held
}

// ReleaseWeek releases every receipt of week in state (held or
// quarantined), each as Release does and with its own history event
// carrying by. A receipt that changed state meanwhile is skipped, and a
// quarantined one that was sent stays quarantined (both counted Skipped).
func ReleaseWeek(ctx context.Context, s Store, week digest.ISOWeek, state digest.State, by Action) (BulkResult, error) {
	var res BulkResult
	if state != digest.StateHeld && state != digest.StateQuarantined {
		return res, fmt.Errorf("%w: release state %q: want held or quarantined", ErrInvalid, state)
	}
	keys, err := weekKeys(ctx, s, week, state)
	if err != nil {
		return res, err
	}
	for _, k := range keys {
		err := s.Release(ctx, k, by)
		switch {
		case err == nil:
			res.Done++
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
