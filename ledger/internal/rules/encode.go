package rules

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// Micros is d in whole microseconds, the ledgers' precision: how a lease
// or a delay travels to the ledger, which adds it to its own clock.
func Micros(d time.Duration) int64 { return d.Microseconds() }

// ParseGhosts reads what ledger.Expectation.GhostsJSON wrote.
func ParseGhosts(s string) (map[digest.State]int64, error) {
	var m map[string]int64
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("expectation ghosts %q: %w", s, err)
	}
	out := make(map[digest.State]int64, len(m))
	for k, n := range m {
		out[digest.State(k)] = n
	}
	return out, nil
}

// ParseTombstoneWeek sets t's week from its stored text.
func ParseTombstoneWeek(t *digest.PruneTombstone, week string) error {
	w, err := digest.ParseISOWeek(week)
	if err != nil {
		return fmt.Errorf("tombstone week %q: %w", week, err)
	}
	t.Pin.Week = w
	return nil
}

// WeekOrAll is the week filter of a query: "" selects every week.
func WeekOrAll(week digest.ISOWeek) string {
	if week.IsZero() {
		return ""
	}
	return week.String()
}

// WeekPageSize returns limit, or ledger.DefaultWeekPage when it is 0 or less.
func WeekPageSize(limit int) int {
	if limit <= 0 {
		return ledger.DefaultWeekPage
	}
	return limit
}
