package ledger

import (
	"fmt"
	"time"
)

// RunEnd is how one run of a week ended, as "digest status" shows it
// (Store.RecordRunEnd, Store.LastRun), also in its JSON. It holds no
// customer data.
type RunEnd struct {
	RunID     string    `json:"run_id"`
	Mode      string    `json:"mode"`  // "enforce" or "observe"
	Shard     string    `json:"shard"` // "I/N", or "all" for the whole week
	ExitCode  int       `json:"exit_code"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
}

// Validate refuses a RunEnd without the fields status relies on.
func (e RunEnd) Validate() error {
	if e.RunID == "" || e.Mode == "" || e.EndedAt.IsZero() {
		return fmt.Errorf("%w: a run end needs a run id, a mode and an end time", ErrInvalid)
	}
	return nil
}
