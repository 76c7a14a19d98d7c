package ledger

import (
	"fmt"
	"time"
)

// RunEnd is how one run of a week ended, as "digest status" shows it
// (Store.RecordRunEnd, Store.LastRun). It holds no customer data.
type RunEnd struct {
	RunID     string
	Mode      string // "enforce" or "observe"
	Shard     string // "I/N", or "" for the whole week
	ExitCode  int
	StartedAt time.Time
	EndedAt   time.Time
}

// Validate refuses a RunEnd without the fields status relies on.
func (e RunEnd) Validate() error {
	if e.RunID == "" || e.Mode == "" || e.EndedAt.IsZero() {
		return fmt.Errorf("%w: a run end needs a run id, a mode and an end time", ErrInvalid)
	}
	return nil
}
