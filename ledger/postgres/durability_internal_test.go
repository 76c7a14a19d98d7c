package postgres

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
		fsync, fpw, sync string
		bad              []string // settings the error must name
	}{
		{"on", "on", "on", nil},
		{"on", "on", "remote_apply", nil},
		{"on", "on", "local", nil},
		{"off", "on", "on", []string{"fsync = off"}},
		{"on", "off", "on", []string{"full_page_writes = off"}},
		{"on", "on", "off", []string{"synchronous_commit = off"}},
		{"off", "off", "off", []string{"fsync = off", "full_page_writes = off", "synchronous_commit = off"}},
	} {
		err := durabilitySettings(tc.fsync, tc.fpw, tc.sync).Err()
		if len(tc.bad) == 0 {
			if err != nil {
				t.Errorf("%s/%s/%s: %v, want nil", tc.fsync, tc.fpw, tc.sync, err)
			}
			continue
		}
		if !errors.Is(err, ledger.ErrNotDurable) {
			t.Errorf("%s/%s/%s: %v, want ErrNotDurable", tc.fsync, tc.fpw, tc.sync, err)
			continue
		}
		for _, b := range tc.bad {
			if !strings.Contains(err.Error(), b) {
				t.Errorf("%s/%s/%s: %q does not name %q", tc.fsync, tc.fpw, tc.sync, err, b)
			}
		}
	}
}
