package ledger

import (
	"fmt"

	"github.com/weeklydigest/digest/digest"
)

// tombstoneColumns are the columns of a digest.PruneTombstone, in scan
// order (both dialects).
const tombstoneColumns = `digest_type, iso_week, version, receipts_pruned, first_pruned_at, last_pruned_at`

func parseTombstoneWeek(t *digest.PruneTombstone, week string) error {
	w, err := digest.ParseISOWeek(week)
	if err != nil {
		return fmt.Errorf("tombstone week %q: %w", week, err)
	}
	t.Pin.Week = w
	return nil
}

// weekOrAll is the week filter of a query: "" selects every week.
func weekOrAll(week digest.ISOWeek) string {
	if week.IsZero() {
		return ""
	}
	return week.String()
}
