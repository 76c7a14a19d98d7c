package ledgertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// unsubscribe is the suppression the one-click endpoint records.
func unsubscribe(keys []digest.SuppressionKey) ledger.Suppression {
	return ledger.Suppression{Keys: keys, Subject: digest.SubjectCustomer, Reason: digest.ReasonUnsubscribe, Source: "one-click"}
}

// testSuppressIsIdempotentAndRecorded: a second add of the same customer
// adds nothing and writes no history row; the run's batch look-up finds
// customers and addresses; a removal needs who and why and is recorded.
func testSuppressIsIdempotentAndRecorded(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	kr := keyring(t, "k1")
	alice, bob := kr.CustomerKeys("cust_alice"), kr.CustomerKeys("cust_bob")
	bounced := kr.AddressKeys("Carol@Example.com")
	if bounced[0] != digest.SuppressionKey(kr.AddressKey("carol@example.com")) {
		t.Fatalf("AddressKeys[0] = %s, want the address_key the logs carry, %s", bounced[0], kr.AddressKey("carol@example.com"))
	}

	added, err := s.Suppress(ctx, unsubscribe(alice))
	if err != nil || !added {
		t.Fatalf("first Suppress = %v, %v; want added", added, err)
	}
	at := clk.Now().UTC().Truncate(time.Microsecond)
	clk.Advance(time.Hour)
	if added, err := s.Suppress(ctx, unsubscribe(alice)); err != nil || added {
		t.Fatalf("second Suppress = %v, %v; want nothing added", added, err)
	}
	if _, err := s.Suppress(ctx, ledger.Suppression{Keys: bounced, Subject: digest.SubjectAddress, Reason: digest.ReasonHardBounce, Source: "postmark"}); err != nil {
		t.Fatal(err)
	}

	all := append(append(append([]digest.SuppressionKey{}, alice...), bob...), bounced...)
	got, err := s.Suppressed(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[alice[0]] || !got[bounced[0]] || got[bob[0]] {
		t.Fatalf("Suppressed = %v; want alice and the bounced address only", got)
	}
	if got, err := s.Suppressed(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("Suppressed(nil) = %v, %v", got, err)
	}

	list, err := s.ListSuppressions(ctx, ledger.SuppressionFilter{Keys: alice})
	if err != nil || len(list) != 1 {
		t.Fatalf("ListSuppressions(alice) = %+v, %v; want one", list, err)
	}
	want := ledger.Suppression{Keys: alice[:1], Subject: digest.SubjectCustomer, Reason: digest.ReasonUnsubscribe, Source: "one-click", At: at}
	if l := list[0]; l.Key() != want.Key() || l.Subject != want.Subject || l.Reason != want.Reason || l.Source != want.Source || !l.At.Equal(at) {
		t.Fatalf("ListSuppressions(alice) = %+v; want %+v (the first add's time)", l, want)
	}
	if list, err := s.ListSuppressions(ctx, ledger.SuppressionFilter{}); err != nil || len(list) != 2 {
		t.Fatalf("ListSuppressions() = %d, %v; want 2", len(list), err)
	}
	if page, err := s.ListSuppressions(ctx, ledger.SuppressionFilter{Limit: 1}); err != nil || len(page) != 1 {
		t.Fatalf("first page: %d, %v", len(page), err)
	} else if rest, err := s.ListSuppressions(ctx, ledger.SuppressionFilter{After: page[0].Key()}); err != nil || len(rest) != 1 || rest[0].Key() == page[0].Key() {
		t.Fatalf("second page: %+v, %v", rest, err)
	}

	if _, err := s.Unsuppress(ctx, alice, ledger.Action{By: "oncall"}); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("Unsuppress without a reason: %v; want ErrInvalid", err)
	}
	clk.Advance(time.Hour)
	n, err := s.Unsuppress(ctx, alice, ledger.Action{By: "oncall", Reason: "ticket 42: subscribed again"})
	if err != nil || n != 1 {
		t.Fatalf("Unsuppress = %d, %v; want 1", n, err)
	}
	if n, err := s.Unsuppress(ctx, alice, op); err != nil || n != 0 {
		t.Fatalf("second Unsuppress = %d, %v; want 0", n, err)
	}
	if got, _ := s.Suppressed(ctx, alice); len(got) != 0 {
		t.Fatalf("after Unsuppress, Suppressed = %v", got)
	}

	hist, err := s.SuppressionHistory(ctx, alice, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 {
		t.Fatalf("history of alice: %+v; want one add and one removal", hist)
	}
	if h := hist[0]; h.Action != ledger.SuppressionAdded || h.Reason != digest.ReasonUnsubscribe || h.Source != "one-click" || !h.At.Equal(at) {
		t.Fatalf("add event %+v", h)
	}
	if h := hist[1]; h.Action != ledger.SuppressionRemoved || h.Reason != digest.ReasonUnsubscribe || h.By != "oncall" ||
		h.Note != "ticket 42: subscribed again" || h.Key != alice[0] || !h.At.Equal(at.Add(2*time.Hour)) {
		t.Fatalf("removal event %+v", h)
	}
	if all, err := s.SuppressionHistory(ctx, nil, 0); err != nil || len(all) != 3 {
		t.Fatalf("whole history: %d events, %v; want 3", len(all), err)
	}

	// Suppressed again after the removal: a new add.
	if added, err := s.Suppress(ctx, unsubscribe(alice)); err != nil || !added {
		t.Fatalf("Suppress after removal = %v, %v; want added", added, err)
	}
}

// testSuppressionFoundAfterRotation: a suppression recorded under the old
// key id is found, kept (not added twice) and removed with the new ring.
func testSuppressionFoundAfterRotation(t *testing.T, be Driver) {
	s, _, _ := fresh(t, be)
	ctx := context.Background()
	old := keyring(t, "k1").CustomerKeys("cust_alice")
	if _, err := s.Suppress(ctx, unsubscribe(old)); err != nil {
		t.Fatal(err)
	}
	rotated := keyring(t, "k2", "k1").CustomerKeys("cust_alice")
	if rotated[1] != old[0] {
		t.Fatalf("rotated candidates %v do not hold the old key %s", rotated, old[0])
	}
	if got, err := s.Suppressed(ctx, rotated); err != nil || !got[old[0]] {
		t.Fatalf("Suppressed(rotated) = %v, %v; want the old key", got, err)
	}
	if added, err := s.Suppress(ctx, unsubscribe(rotated)); err != nil || added {
		t.Fatalf("Suppress under the new key id = %v, %v; want nothing added", added, err)
	}
	if n, err := s.Unsuppress(ctx, rotated, op); err != nil || n != 1 {
		t.Fatalf("Unsuppress(rotated) = %d, %v; want 1", n, err)
	}
}

// testSuppressConcurrently: concurrent adds of one customer (a recipient
// clicking twice, two pods) store one suppression and one history row.
func testSuppressConcurrently(t *testing.T, be Driver) {
	s, _, _ := fresh(t, be)
	ctx := context.Background()
	keys := keyring(t, "k1").CustomerKeys("cust_alice")
	const n = 8
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		added int
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.Suppress(ctx, unsubscribe(keys))
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				added++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	hist, err := s.SuppressionHistory(ctx, keys, 0)
	if err != nil {
		t.Fatal(err)
	}
	if added != 1 || len(hist) != 1 {
		t.Fatalf("%d concurrent adds: %d reported added, %d history rows; want 1 and 1", n, added, len(hist))
	}
}

// testSuppressionRequestsValidated: a malformed suppression is refused and
// stores nothing.
func testSuppressionRequestsValidated(t *testing.T, be Driver) {
	s, _, _ := fresh(t, be)
	ctx := context.Background()
	good := unsubscribe(keyring(t, "k1").CustomerKeys("cust_alice"))
	for name, mutate := range map[string]func(*ledger.Suppression){
		"no key":      func(sp *ledger.Suppression) { sp.Keys = nil },
		"bad key":     func(sp *ledger.Suppression) { sp.Keys = []digest.SuppressionKey{"cust_alice"} },
		"bad reason":  func(sp *ledger.Suppression) { sp.Reason = "bored" },
		"bad subject": func(sp *ledger.Suppression) { sp.Subject = "domain" },
		"no source":   func(sp *ledger.Suppression) { sp.Source = "" },
	} {
		sp := good
		mutate(&sp)
		if _, err := s.Suppress(ctx, sp); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("%s: %v; want ErrInvalid", name, err)
		}
	}
	if list, err := s.ListSuppressions(ctx, ledger.SuppressionFilter{}); err != nil || len(list) != 0 {
		t.Fatalf("after refused requests: %+v, %v; want nothing stored", list, err)
	}
	if _, err := s.Unsuppress(ctx, nil, op); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("Unsuppress without keys: %v; want ErrInvalid", err)
	}
}
