package ledger

import (
	"fmt"

	"github.com/weeklydigest/digest/digest"
)

// ReceiptColumns are the columns of a Receipt, in scan order (both dialects).
const ReceiptColumns = `key, key_id, state, fingerprint, coalesce(conflict_fingerprint, ''), attempts,
    claim_token, lease_expires_at, send_started, send_started_at, maybe_sent, next_attempt_at,
    first_claimed_at, last_attempt_at, sent_at, coalesce(provider_ref, ''), coalesce(last_error, ''),
    run_id, iso_week, updated_at`

// TombstoneColumns are the columns of a digest.PruneTombstone, in scan
// order (both dialects).
const TombstoneColumns = `digest_type, iso_week, version, receipts_pruned, first_pruned_at, last_pruned_at`

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
