package run_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/sender/events"
)

// An ambiguous send through a provider without a search API, looked up
// in the provider events the ledger holds (events.Lookup): while no event
// names the key and the provider's events are not known complete past the
// send, the look-up's error leaves the digest maybe-sent, never resent;
// a delivery event reconciles it (sent, no second message); once the
// provider's watermark passes the send, "not found" resends it, once.
func TestRunAmbiguousSendReconciledFromProviderEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 16)
	ctx := context.Background()
	p := newProvider()
	// Half the messages reached the provider before the connection
	// dropped, half did not; neither side could tell.
	reached := func(k digest.Key) bool { return k.Hex()[0]%2 == 0 }
	p.script = func(k digest.Key, attempt int) (bool, error) {
		if attempt == 1 {
			return reached(k), &digest.SendError{Class: digest.SendAmbiguous, Err: errors.New("connection lost after DATA")}
		}
		return true, nil
	}
	lk := events.New("relay", f.store, time.Hour)
	runOnce := func() run.Summary {
		return f.run(f.runner(p, lk, func(c *run.Config) { c.Deadline = f.clock.Now().Add(30 * time.Minute) }))
	}

	sum := runOnce()
	if sum.Sent != 0 || sum.Reconciled != 0 || sum.LookupErrors == 0 || sum.LookupsNotFound != 0 || sum.Complete() {
		t.Fatalf("first run %+v: want every ambiguous send left for a later look-up (errors, nothing sent or not found)", sum)
	}
	var inA, inB []digest.Key
	p.mu.Lock()
	for k, n := range p.sends {
		if n != 1 {
			t.Errorf("%s sent %d times before any event; want once", k, n)
		}
		if reached(k) {
			inA = append(inA, k)
		} else {
			inB = append(inB, k)
		}
	}
	p.mu.Unlock()
	if len(inA) == 0 || len(inB) == 0 || len(inA)+len(inB) != f.want {
		t.Fatalf("%d reached, %d not, of %d: the test needs both", len(inA), len(inB), f.want)
	}
	if got := f.states()[digest.StateRetryable]; got != int64(f.want) {
		t.Fatalf("%d retryable receipts; want all %d (maybe sent, held for a look-up)", got, f.want)
	}

	// The provider posts the delivery events of the ones it had.
	for i, k := range inA {
		if _, err := f.store.RecordProviderEvent(ctx, ledger.ProviderEvent{Provider: "relay", ID: "d" + k.Hex()[:12],
			Kind: ledger.EventDelivered, Key: k, Occurred: f.clock.Now().Add(time.Duration(i) * time.Second)}, ledger.EventPolicy{}); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Advance(2 * time.Hour)
	sum = runOnce()
	if sum.Reconciled != len(inA) || sum.Sent != 0 || sum.LookupsNotFound != 0 {
		t.Fatalf("second run %+v: want %d reconciled by their events, the rest still held for a look-up", sum, len(inA))
	}

	// Events of later messages move the watermark (newest less the lag)
	// past the sends: the ones with no event were not taken.
	f.clock.Advance(2 * time.Hour)
	if _, err := f.store.RecordProviderEvent(ctx, ledger.ProviderEvent{Provider: "relay", ID: "later", Kind: ledger.EventAccepted,
		Key: digest.Key("k1:" + inA[0].Hex()[:63] + "f"), Occurred: f.clock.Now()}, ledger.EventPolicy{}); err != nil {
		t.Fatal(err)
	}
	sum = runOnce()
	if sum.Sent != len(inB) || sum.LookupsNotFound != len(inB) || !sum.Complete() {
		t.Fatalf("third run %+v: want the %d without an event resent", sum, len(inB))
	}
	if accepted, dups := p.totals(); dups != 0 || accepted != f.want {
		t.Fatalf("provider holds %d messages, %d duplicates; want %d, none", accepted, dups, f.want)
	}
}
