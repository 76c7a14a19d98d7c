package run

import (
	"sync"
	"testing"
	"time"
)

// The finisher gets a batch when it is full, batchLinger after its first
// item when it is not, and what is left when the queue closes: every item
// once, and the linger timer of a batch already handed over does nothing.
func TestDoneQueueBatchesFullLingeredAndLast(t *testing.T) {
	t.Parallel()
	// Full and last batches on a queue whose linger never fires during
	// the test: on a loaded machine batchLinger can pass between two puts.
	q := newDoneQueue(3, time.Hour)
	its := make([]*item, 8)
	for i := range its {
		its[i] = &item{}
	}
	var wg sync.WaitGroup
	for _, it := range its[:3] { // a full batch, from several senders
		wg.Go(func() { q.put(it) })
	}
	wg.Wait()
	if b := <-q.out; len(b) != 3 {
		t.Fatalf("full batch of %d, want 3", len(b))
	}
	for _, it := range its[3:7] { // 4 items: one full batch, one left
		q.put(it)
	}
	if b := <-q.out; len(b) != 3 {
		t.Fatalf("full batch of %d, want 3", len(b))
	}
	q.close()
	if b := <-q.out; len(b) != 1 || b[0] != its[6] {
		t.Fatalf("last batch %v, want the item left", b)
	}
	if _, ok := <-q.out; ok {
		t.Fatal("the queue's output stays open after close")
	}

	// A batch that does not fill is handed over batchLinger after its
	// first item (no sooner: load only makes it later).
	lq := newDoneQueue(3, batchLinger)
	lq.put(its[7])
	t0 := time.Now()
	b := <-lq.out // lingered: nothing else comes
	if len(b) != 1 || b[0] != its[7] {
		t.Fatalf("lingered batch %v, want the one item", b)
	}
	if waited := time.Since(t0); waited < batchLinger/2 {
		t.Errorf("a batch of one came after %s: want it to linger about %s", waited, batchLinger)
	}
	lq.put(its[0])
	lq.close() // hands the item over before its linger timer fires
	if b := <-lq.out; len(b) != 1 {
		t.Fatalf("last batch %v, want one item", b)
	}
	time.Sleep(2 * batchLinger) // the last batch's timer fires into a closed queue: no panic
}

// The markers reserve room for a chunk before they mark it, and the room
// comes back as the senders take the claims: two chunks may be marked at
// once, never a third before a chunk's worth has gone to the senders (the
// "marked, not yet sent" window). The senders take the claims in order,
// then see the close.
func TestSendQueueHoldsAtMostTwoChunks(t *testing.T) {
	t.Parallel()
	q := newSendQueue(3)
	chunk := func(n int) []*item {
		its := make([]*item, n)
		for i := range its {
			its[i] = &item{}
		}
		return its
	}
	first, second, third := chunk(3), chunk(3), chunk(2)
	q.reserve(len(first)) // two marks under way at once
	q.reserve(len(second))
	reserved := make(chan struct{})
	go func() {
		q.reserve(len(third))
		close(reserved)
	}()
	q.push(first)
	q.push(second)
	for i, want := range first {
		select {
		case <-reserved:
			t.Fatalf("a third chunk reserved with %d of the first two still queued (limit 6)", 6-i)
		case <-time.After(10 * time.Millisecond):
		}
		if it, ok := q.pop(); !ok || it != want {
			t.Fatalf("pop %d: %p %v, want the first chunk's in order", i, it, ok)
		}
	}
	<-reserved // the first chunk went to the senders: room for the third
	q.push(third[:1])
	q.release(1) // one of the third was lost to another run: not queued
	q.close()
	for i, want := range append(second, third[0]) {
		if it, ok := q.pop(); !ok || it != want {
			t.Fatalf("pop %d after the first chunk: %p %v", i, it, ok)
		}
	}
	if _, ok := q.pop(); ok {
		t.Fatal("pop after close and drain: want false")
	}
	if q.held != 0 {
		t.Fatalf("%d claims still counted in the window after all were taken or released", q.held)
	}
}
