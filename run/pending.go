package run

import (
	"slices"
	"sync"
	"time"
)

// MaxPendingCustomers bounds the customer ids a run remembers between
// passes: those whose digests were left pending (retryable, not due, or
// busy under another run's lease), each with the time it comes due. A
// retry pass reads only the ones due by then (SourceQuery.Customers), so
// that a pass costs what is left, not the week. Above the bound (about
// 100 bytes an id, so ~10 MB) the run forgets them and the retry pass
// reads the whole source, as a first pass does.
const MaxPendingCustomers = 100_000

// pendingCustomers are the customers a pass left pending, with when each
// comes due; overflow once more than MaxPendingCustomers were added.
type pendingCustomers struct {
	mu       sync.Mutex
	due      map[string]time.Time
	overflow bool
	// retryable marks the customers of due whose receipt was left
	// retryable (a temporary failure, or not due yet), rather than busy
	// under another run's lease: Summary.Retryable counts them.
	retryable map[string]bool
}

func (s *pendingCustomers) add(id string, at time.Time) { s.put(id, at, false) }

// addRetryable adds a customer whose receipt was left retryable.
func (s *pendingCustomers) addRetryable(id string, at time.Time) { s.put(id, at, true) }

func (s *pendingCustomers) put(id string, at time.Time, retryable bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.overflow {
		return
	}
	if s.due == nil {
		s.due = map[string]time.Time{}
	}
	if old, ok := s.due[id]; !ok || at.Before(old) {
		s.due[id] = at
	}
	if retryable {
		if s.retryable == nil {
			s.retryable = map[string]bool{}
		}
		s.retryable[id] = true
	}
	if len(s.due) > MaxPendingCustomers {
		s.overflow, s.due, s.retryable = true, nil, nil
	}
}

// retryables returns how many of the customers were left retryable.
func (s *pendingCustomers) retryables() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.retryable)
}

// merge adds what another set holds (customers left over, not read by
// the pass that made s).
func (s *pendingCustomers) merge(o *pendingCustomers) {
	if o.overflow {
		s.mu.Lock()
		s.overflow, s.due, s.retryable = true, nil, nil
		s.mu.Unlock()
		return
	}
	for id, at := range o.due {
		s.put(id, at, o.retryable[id])
	}
}

// earliest returns the earliest due time, or zero.
func (s *pendingCustomers) earliest() time.Time {
	var first time.Time
	for _, at := range s.due {
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first
}

// retryCoalesce is how much later than its due time a pending row may be
// retried, so that rows due close together share a retry pass: a tenth of
// the lease, 1 to 30 seconds (as busyRecheck).
func retryCoalesce(lease time.Duration) time.Duration { return busyRecheck(lease) }

// lastWithin returns the latest due time in [first, first+window]; first
// when none is.
func (s *pendingCustomers) lastWithin(first time.Time, window time.Duration) time.Time {
	last, end := first, first.Add(window)
	for _, at := range s.due {
		if at.After(last) && !at.After(end) {
			last = at
		}
	}
	return last
}

// split returns, sorted, the customers due at now (at least those due
// first, should the clock not have reached them), and the set of the rest.
func (s *pendingCustomers) split(now time.Time) (due []string, rest *pendingCustomers) {
	if first := s.earliest(); now.Before(first) {
		now = first
	}
	rest = &pendingCustomers{}
	for id, at := range s.due {
		if at.After(now) {
			rest.put(id, at, s.retryable[id])
		} else {
			due = append(due, id)
		}
	}
	slices.Sort(due)
	return due, rest
}
