package run

import (
	"sync"
	"time"
)

// doneQueue gathers the items whose claims end (sent, failed, given back)
// into batches for the finisher. The senders append under a lock and the
// finisher is woken once per batch, when it fills or batchLinger after its
// first item, instead of a gathering goroutine woken once per send.
//
// A full batch is handed over while the lock is held: a sender (or the
// linger timer) waits there while the finisher is behind, and so do the
// other senders, so what is sent and not yet recorded stays bounded by
// the batch being filled, the one handed over and the one being written.
type doneQueue struct {
	mu     sync.Mutex
	batch  []*item
	size   int
	gen    int // counts the batches taken, so that a stale linger timer does nothing
	timer  *time.Timer
	closed bool
	out    chan []*item
}

func newDoneQueue(size int) *doneQueue {
	return &doneQueue{size: size, out: make(chan []*item, 1)}
}

// put adds an item whose claim ended.
func (q *doneQueue) put(it *item) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.batch == nil {
		q.batch = make([]*item, 0, q.size)
	}
	q.batch = append(q.batch, it)
	if len(q.batch) >= q.size {
		q.handLocked()
		return
	}
	if len(q.batch) == 1 {
		gen := q.gen
		q.timer = time.AfterFunc(batchLinger, func() { q.linger(gen) })
	}
}

// linger hands over batch gen if it is still being filled.
func (q *doneQueue) linger(gen int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if gen == q.gen && !q.closed && len(q.batch) > 0 {
		q.handLocked()
	}
}

// handLocked hands the batch to the finisher, waiting while it is behind.
func (q *doneQueue) handLocked() {
	b := q.batch
	q.batch = nil
	q.gen++
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	q.out <- b
}

// close hands over what is left and ends the finisher's input. Every put
// must have returned.
func (q *doneQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.batch) > 0 {
		q.handLocked()
	}
	q.closed = true
	q.gen++
	close(q.out)
}
