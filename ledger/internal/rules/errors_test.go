package rules_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/internal/rules"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	driverErr := errors.New("driver said no")
	conflict := func(error) ledger.ErrorClass { return ledger.Conflict }
	for _, tc := range []struct {
		name    string
		err     error
		wrapped bool
		class   ledger.ErrorClass
	}{
		{"nil", nil, false, ledger.Fatal},
		{"a driver error", fmt.Errorf("claim: %w", driverErr), true, ledger.Conflict},
		{"the ledger's own", fmt.Errorf("show k: %w", ledger.ErrNotFound), false, ledger.Fatal},
		{"invalid", fmt.Errorf("%w: no keys", ledger.ErrInvalid), false, ledger.Fatal},
		{"cancelled", fmt.Errorf("claim: %w", context.Canceled), false, ledger.Fatal},
		{"deadline", fmt.Errorf("claim: %w", context.DeadlineExceeded), false, ledger.Transient},
		{"classified already", &ledger.DriverError{Class: ledger.Transient, Err: driverErr}, true, ledger.Transient},
	} {
		err := tc.err
		rules.Classify(&err, conflict)
		var de *ledger.DriverError
		if errors.As(err, &de) != tc.wrapped || ledger.ErrorClassOf(err) != tc.class {
			t.Errorf("%s: %v classified %s (wrapped %v), want %s (wrapped %v)", tc.name, err, ledger.ErrorClassOf(err), errors.As(err, &de), tc.class, tc.wrapped)
		}
		if tc.err != nil && err.Error() != tc.err.Error() {
			t.Errorf("%s: text %q, want the driver's %q", tc.name, err, tc.err)
		}
		if tc.err != nil && !errors.Is(err, tc.err) {
			t.Errorf("%s: errors.Is no longer sees the original", tc.name)
		}
	}
}
