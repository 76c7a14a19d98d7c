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
	wait   time.Duration // batchLinger; longer in tests that must not see it fire
	gen    int           // counts the batches taken, so that a stale linger timer does nothing
	timer  *time.Timer
	closed bool
	out    chan []*item
}

func newDoneQueue(size int, linger time.Duration) *doneQueue {
	return &doneQueue{size: size, wait: linger, out: make(chan []*item, 1)}
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
		q.timer = time.AfterFunc(q.wait, func() { q.linger(gen) })
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

// sendQueue hands the claims marked as sending to the senders, and bounds
// the "marked, not yet sent" window of the package documentation: a start
// marker reserves room for a chunk before it marks it, and the room comes
// back as the senders take the claims. So the claims being marked, marked
// and waiting, and queued are at most limit (two chunks) together, however
// many marks are under way: when the senders drain the queue faster than
// one mark's round trip, a second mark fills the window instead of the
// senders waiting. A sender takes one claim at a time; a marker is woken
// when a chunk's room is free, not once a send.
type sendQueue struct {
	mu       sync.Mutex
	nonEmpty sync.Cond // a sender may take one
	freed    sync.Cond // a chunk may fit
	items    []*item
	held     int // reserved: being marked, marked, or queued
	limit    int
	chunk    int
	closed   bool
}

func newSendQueue(chunk int) *sendQueue {
	q := &sendQueue{limit: 2 * chunk, chunk: chunk}
	q.nonEmpty.L, q.freed.L = &q.mu, &q.mu
	return q
}

// reserve waits until n more claims fit in the window and counts them.
func (q *sendQueue) reserve(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.held > 0 && q.held+n > q.limit {
		q.freed.Wait()
	}
	q.held += n
}

// release gives back the room of n reserved claims that will not be
// queued (lost, or the mark failed).
func (q *sendQueue) release(n int) {
	if n == 0 {
		return
	}
	q.mu.Lock()
	q.held -= n
	q.freed.Broadcast()
	q.mu.Unlock()
}

// push queues reserved claims for the senders.
func (q *sendQueue) push(its []*item) {
	if len(its) == 0 {
		return
	}
	q.mu.Lock()
	q.items = append(q.items, its...)
	q.nonEmpty.Broadcast()
	q.mu.Unlock()
}

// pop takes the next claim to send, waiting for one; false when the
// queue is closed and empty.
func (q *sendQueue) pop() (*item, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 {
		if q.closed {
			return nil, false
		}
		q.nonEmpty.Wait()
	}
	it := q.items[0]
	q.items[0] = nil
	q.items = q.items[1:]
	if len(q.items) == 0 {
		q.items = nil
	}
	q.held--
	if q.limit-q.held >= q.chunk || q.held == 0 {
		q.freed.Broadcast()
	}
	return it, true
}

// close ends the senders' input once they have taken what it holds.
func (q *sendQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.nonEmpty.Broadcast()
	q.mu.Unlock()
}
