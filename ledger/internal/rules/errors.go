package rules

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// RefuseLiveClaims returns ledger.ErrLiveClaims when n receipts are claimed under
// leases that have not expired, or nil: what MigrateDownTo checks first.
func RefuseLiveClaims(n int64) error {
	if n == 0 {
		return nil
	}
	return fmt.Errorf("migrate: %w: %d receipts are claimed under leases that have not expired; wait for the run to end (digest status), or for DIGEST_LEASE to pass after it crashed, then roll back", ledger.ErrLiveClaims, n)
}

// RepinRefused says why a Repin of pin to asOf moved nothing: the pin
// does not exist (ledger.ErrNotFound) or is not early
// (ledger.ErrWrongState).
func RepinRefused(ctx context.Context, s interface {
	Pinned(context.Context, digest.SnapshotPin) (digest.WeekPin, bool, error)
}, pin digest.SnapshotPin, asOf time.Time) error {
	wp, ok, err := s.Pinned(ctx, pin)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("repin %s/%s/%s: %w: the week is not pinned (no run sent it yet)", pin.Type, pin.Week, pin.Version, ledger.ErrNotFound)
	}
	return fmt.Errorf("repin %s/%s/%s: %w: its cutoff %s is already at or past %s", pin.Type, pin.Week, pin.Version, ledger.ErrWrongState,
		wp.AsOf.UTC().Format(time.RFC3339), asOf.UTC().Format(time.RFC3339))
}

// Classify wraps *errp, when it is a driver's error, in a
// ledger.DriverError of the class classOf gives it. A store defers it in
// every exported method, so each driver error leaves the ledger
// classified. Errors package ledger defines, a cancelled context and
// errors already classified pass as they are.
func Classify(errp *error, classOf func(error) ledger.ErrorClass) {
	err := *errp
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	var de *ledger.DriverError
	for _, own := range []error{ledger.ErrNotFound, ledger.ErrWrongState, ledger.ErrWasSent, ledger.ErrInvalid} {
		if errors.Is(err, own) {
			return
		}
	}
	if errors.As(err, &de) {
		return
	}
	*errp = &ledger.DriverError{Class: classOf(err), Err: err}
}
