package rules

import (
	"fmt"
	"slices"
	"time"

	"github.com/weeklydigest/digest/ledger"
)

// Streak counts the weeks of weeks (newest first, as Weeks returns them)
// that are in bounced, from the first up to the first that is not: the
// consecutive weeks of soft bounces ending with the newest.
func Streak(weeks, bounced []string) int {
	n := 0
	for _, w := range weeks {
		if !slices.Contains(bounced, w) {
			break
		}
		n++
	}
	return n
}

// ProviderNote is the history text of a provider event noted on a receipt.
func ProviderNote(e ledger.ProviderEvent) string {
	s := ledger.HistoryProviderPrefix + e.Provider + " reported " + string(e.Kind)
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s + " at " + e.Occurred.UTC().Format(time.RFC3339)
}

// ValidateAdvance checks an AdvanceWatermark request: a provider, a time
// not after now (the ledger's clock: events cannot be complete up to a
// time that has not come, and a mistyped year would make every maybe-sent
// digest look lost), and who and why (kept with the watermark).
func ValidateAdvance(provider string, until time.Time, by ledger.Action, now time.Time) error {
	if provider == "" || len(provider) > 32 {
		return fmt.Errorf("%w: watermark provider %q: want 1 to 32 bytes", ledger.ErrInvalid, provider)
	}
	if until.IsZero() {
		return fmt.Errorf("%w: watermark without a time", ledger.ErrInvalid)
	}
	if until.After(now) {
		return fmt.Errorf("%w: watermark %s is after the ledger's now, %s: events cannot be complete up to a time that has not come",
			ledger.ErrInvalid, until.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if by.By == "" || by.Reason == "" {
		return fmt.Errorf("%w: advancing a watermark needs who and why", ledger.ErrInvalid)
	}
	return nil
}
