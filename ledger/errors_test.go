package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/weeklydigest/digest/ledger"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	driverErr := errors.New("driver said no")
	conflict := func(error) ledger.Class { return ledger.ClassConflict }
	for _, tc := range []struct {
		name    string
		err     error
		wrapped bool
		class   ledger.Class
	}{
		{"nil", nil, false, ledger.ClassFatal},
		{"a driver error", fmt.Errorf("claim: %w", driverErr), true, ledger.ClassConflict},
		{"the ledger's own", fmt.Errorf("show k: %w", ledger.ErrNotFound), false, ledger.ClassFatal},
		{"invalid", fmt.Errorf("%w: no keys", ledger.ErrInvalid), false, ledger.ClassFatal},
		{"cancelled", fmt.Errorf("claim: %w", context.Canceled), false, ledger.ClassFatal},
		{"deadline", fmt.Errorf("claim: %w", context.DeadlineExceeded), false, ledger.ClassTransient},
		{"classified already", &ledger.DriverError{Class: ledger.ClassTransient, Err: driverErr}, true, ledger.ClassTransient},
	} {
		err := tc.err
		ledger.Classify(&err, conflict)
		var de *ledger.DriverError
		if errors.As(err, &de) != tc.wrapped || ledger.ClassOf(err) != tc.class {
			t.Errorf("%s: %v classified %s (wrapped %v), want %s (wrapped %v)", tc.name, err, ledger.ClassOf(err), errors.As(err, &de), tc.class, tc.wrapped)
		}
		if tc.err != nil && err.Error() != tc.err.Error() {
			t.Errorf("%s: text %q, want the driver's %q", tc.name, err, tc.err)
		}
		if tc.err != nil && !errors.Is(err, tc.err) {
			t.Errorf("%s: errors.Is no longer sees the original", tc.name)
		}
	}
}
