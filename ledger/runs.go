package ledger

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/weeklydigest/digest/digest"
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

// Expectation is what one read of the source found for one shard of a
// pin ("all" for the whole week): the digests the pinned snapshot yields
// (Send), the customers it suppressed, skipped as empty or could not build,
// and the week's receipts held by the shard's customers it did not count
// as Send (Ghosts, by state). A run records it after its first pass read
// the whole shard (Store.RecordExpectation); "digest status" compares it
// with the ledger's counts instead of reading the source again, and reads
// the source when it cannot prove the count (weekstatus.Compute). It
// holds counts and key ids only.
type Expectation struct {
	Shard     string    // "all" or "I/N"
	AsOf      time.Time // the pin's as_of the read used
	Zone      string    // the zone the week's bounds were computed in
	KeyID     string    // the pin's key id
	SendEmpty bool      // the read counted empty digests as Send
	Send      int64
	// Suppressed, Empty and NotBuilt count the customers of the shard the
	// read did not count as Send (a bad source record is NotBuilt).
	Suppressed, Empty, NotBuilt int64
	// Ghosts counts, by state, the receipts of the week under the
	// candidate keys of the shard's suppressed and empty customers.
	Ghosts map[digest.State]int64
	// OtherKeyIDs counts the receipts of the ISO week under a key id other
	// than KeyID when the expectation was recorded.
	OtherKeyIDs int64
	RunID       string
	RecordedAt  time.Time
}

// Validate refuses an Expectation without the fields status relies on.
func (e Expectation) Validate() error {
	if e.Shard == "" || e.AsOf.IsZero() || e.KeyID == "" || e.Zone == "" || e.RunID == "" || e.RecordedAt.IsZero() {
		return fmt.Errorf("%w: an expectation needs a shard, an as_of, a zone, a key id, a run id and a time", ErrInvalid)
	}
	return nil
}

// GhostsJSON is Ghosts as the stores keep it.
func (e Expectation) GhostsJSON() string {
	m := map[string]int64{}
	for s, n := range e.Ghosts {
		if n != 0 {
			m[string(s)] = n
		}
	}
	b, _ := json.Marshal(m) // a map of strings to numbers always marshals
	return string(b)
}

// WeekExpectations is what Store.Expectations returns for a pin: its
// recorded expectations by shard, and what else the week holds that its
// expectations cannot account for.
type WeekExpectations struct {
	Rows []Expectation // every shard recorded, in shard order
	// OtherPins counts the other (type, version) pairs of the ISO week
	// that a run pinned or ran: receipts and observations carry neither,
	// so theirs are mixed with pin's.
	OtherPins int64
	// Observed: the week has observations (observe mode, a cohort's rest).
	Observed bool
}
