package run_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/run"
)

// The summary names a repeated key the same in both modes.
func TestSummaryRepeatKeysSameInBothModes(t *testing.T) {
	t.Parallel()
	enforce := run.Summary{Duplicates: 3, DuplicateAges: [4]int{3, 0, 0, 0}}
	observe := run.Summary{Observed: 5, Repeats: [4]int{2, 0, 0, 0}}
	for name, s := range map[string]run.Summary{"enforce": enforce, "observe": observe} {
		keys := map[string]int64{}
		for _, a := range s.LogValue().Group() {
			if a.Value.Kind() == slog.KindInt64 {
				keys[a.Key] = a.Value.Int64()
			}
			if strings.HasPrefix(a.Key, "duplicate_") {
				t.Errorf("%s: key %s; want repeat_*", name, a.Key)
			}
		}
		for _, b := range run.AgeBucketNames {
			if _, ok := keys["repeat_"+b]; !ok {
				t.Errorf("%s: no repeat_%s in %v", name, b, keys)
			}
		}
	}
	if got := enforce.RepeatAges()[run.AgeUnder5Min]; got != 3 {
		t.Errorf("enforce repeat_under_5m = %d, want 3", got)
	}
}
