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
	q := newDoneQueue(3)
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

	q.put(its[3])
	t0 := time.Now()
	b := <-q.out // lingered: nothing else comes
	if len(b) != 1 || b[0] != its[3] {
		t.Fatalf("lingered batch %v, want the one item", b)
	}
	if waited := time.Since(t0); waited < batchLinger/2 {
		t.Errorf("a batch of one came after %s: want it to linger about %s", waited, batchLinger)
	}

	for _, it := range its[4:] { // 4 items: one full batch, one left
		q.put(it)
	}
	if b := <-q.out; len(b) != 3 {
		t.Fatalf("full batch of %d, want 3", len(b))
	}
	q.close()
	if b := <-q.out; len(b) != 1 || b[0] != its[7] {
		t.Fatalf("last batch %v, want the item left", b)
	}
	if _, ok := <-q.out; ok {
		t.Fatal("the queue's output stays open after close")
	}
	time.Sleep(2 * batchLinger) // the last batch's timer fires into a closed queue: no panic
}

// The start stage adds a chunk only when the send queue has room for all
// of it, so the queue never holds more than its room: the "marked, not yet
// sent" window. The senders take the claims in order, then see the close.
func TestSendQueueHoldsAtMostItsRoom(t *testing.T) {
	t.Parallel()
	q := newSendQueue(3)
	chunk := func(n int) []*item {
		its := make([]*item, n)
		for i := range its {
			its[i] = &item{}
		}
		return its
	}
	first, second := chunk(3), chunk(2)
	q.push(first)
	pushed := make(chan struct{})
	go func() {
		q.push(second)
		close(pushed)
	}()
	for i, want := range first {
		if it, ok := q.pop(); !ok || it != want {
			t.Fatalf("pop %d: %p %v, want the first chunk's in order", i, it, ok)
		}
		if i < len(first)-1 {
			select {
			case <-pushed:
				t.Fatalf("the second chunk went in with %d of the first still queued (room 3)", len(first)-1-i)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	<-pushed // room now: the second chunk goes in
	q.close()
	for i, want := range second {
		if it, ok := q.pop(); !ok || it != want {
			t.Fatalf("pop %d of the second chunk: %p %v", i, it, ok)
		}
	}
	if _, ok := q.pop(); ok {
		t.Fatal("pop after close and drain: want false")
	}
}
