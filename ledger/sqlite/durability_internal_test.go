package sqlite

import (
	"errors"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/ledger"
)

// Each setting that can lose a committed receipt is refused by name.
func TestDurabilitySettingsNameTheUnsafeOne(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sync int
		mode string
		bad  []string
	}{
		{2, "wal", nil},
		{3, "delete", nil},
		{1, "wal", []string{"synchronous = NORMAL"}},
		{0, "wal", []string{"synchronous = OFF"}},
		{2, "memory", []string{"journal_mode = memory"}},
		{2, "OFF", []string{"journal_mode = off"}},
	} {
		err := durabilitySettings(tc.sync, tc.mode).Err()
		if len(tc.bad) == 0 {
			if err != nil {
				t.Errorf("%d/%s: %v, want nil", tc.sync, tc.mode, err)
			}
			continue
		}
		if !errors.Is(err, ledger.ErrNotDurable) {
			t.Errorf("%d/%s: %v, want ErrNotDurable", tc.sync, tc.mode, err)
			continue
		}
		for _, b := range tc.bad {
			if !strings.Contains(err.Error(), b) {
				t.Errorf("%d/%s: %q does not name %q", tc.sync, tc.mode, err, b)
			}
		}
	}
}
