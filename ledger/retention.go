package ledger

import (
	"fmt"

	"github.com/weeklydigest/digest/digest"
)

// ParseTombstoneWeek sets t's week from its stored text.
func ParseTombstoneWeek(t *digest.PruneTombstone, week string) error {
	w, err := digest.ParseISOWeek(week)
	if err != nil {
		return fmt.Errorf("tombstone week %q: %w", week, err)
	}
	t.Pin.Week = w
	return nil
}

// weekOrAll is the week filter of a query: "" selects every week.
func WeekOrAll(week digest.ISOWeek) string {
	if week.IsZero() {
		return ""
	}
	return week.String()
}
