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

// Accounted adds the parts a digest ends in, once each: Retryable is a
// part of Pending and LostAfterSend of LostClaims, not added again.
func TestSummaryAccountsForEveryDigest(t *testing.T) {
	t.Parallel()
	s := run.Summary{
		Digests: 100, Sent: 10, Reconciled: 2, Duplicates: 20, Quarantined: 1, Held: 1, Failed: 3,
		SettledByOthers: 30, Skipped: 4, Suppressed: 5, Invalid: 1, Observed: 6, Pending: 9, Retryable: 4,
		LostClaims: 8, LostAfterSend: 3, Retries: 7, Renewals: 12, Throttled: 2,
	}
	if got := s.Accounted(); got != 100 {
		t.Fatalf("Accounted = %d, want 100", got)
	}
	keys := map[string]int64{}
	for _, a := range s.LogValue().Group() {
		if a.Value.Kind() == slog.KindInt64 {
			keys[a.Key] = a.Value.Int64()
		}
	}
	if n, ok := keys["settled_by_others"]; !ok || n != 30 {
		t.Errorf("settled_by_others = %d (present %v), want 30", n, ok)
	}
	if _, ok := keys["unaccounted"]; ok {
		t.Errorf("unaccounted logged for a summary that adds up: %v", keys)
	}
	s.Digests = 103 // three in flight when a signal stopped the run
	keys = map[string]int64{}
	for _, a := range s.LogValue().Group() {
		if a.Value.Kind() == slog.KindInt64 {
			keys[a.Key] = a.Value.Int64()
		}
	}
	if s.Unaccounted() != 3 || keys["unaccounted"] != 3 {
		t.Errorf("Unaccounted = %d, logged %d; want 3", s.Unaccounted(), keys["unaccounted"])
	}
}
