package weekstatus_test

import (
	"context"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/weekstatus"
)

// Issue 35, defect 2: with the week also run under other versions, Count
// looks each customer up under every version and counts the customers
// sent under more than one, once each; the receipt states are this
// version's only, so "sent" cannot exceed the expected customers.
func TestCountCustomersSentUnderMoreThanOneVersion(t *testing.T) {
	t.Parallel()
	week := digest.ISOWeek{Year: 2026, Week: 40}
	records, src := syntheticFile(t, 40, week)
	kr, err := digest.ParseKeyring("k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	if err != nil {
		t.Fatal(err)
	}
	spec := digest.Spec{Week: week, Location: time.UTC, Type: "weekly_activity", Version: "v2"}
	key := func(id, v string) digest.Key {
		return kr.Key(digest.Identity{Customer: id, Week: week, Type: spec.Type, Version: v})
	}
	lk := &pagedLookup{states: map[digest.Key]digest.State{}, observed: map[digest.Key]bool{}}
	var sendable, v2Sent, multi int64
	for i, r := range records {
		if len(r.Activity) == 0 {
			continue
		}
		sendable++
		id := r.Customer.ID
		lk.states[key(id, "v1")] = digest.StateSent // the week went out as v1
		switch i % 3 {
		case 0: // resent as v2 and as v3: three versions, one customer
			lk.states[key(id, "v2")], lk.states[key(id, "v3")] = digest.StateSent, digest.StateSent
			v2Sent++
			multi++
		case 1: // resent as v2
			lk.states[key(id, "v2")] = digest.StateSent
			v2Sent++
			multi++
		case 2: // v2 failed for good: v1 only
			lk.states[key(id, "v2")] = digest.StateFailed
		}
	}
	end := week.End(time.UTC)
	tl, err := weekstatus.Count(context.Background(), weekstatus.Input{Source: src, Spec: spec, AsOf: end, Latest: end,
		Keys: kr.Candidates, Ledger: lk, OtherVersions: []string{"v1", "v3"}})
	if err != nil {
		t.Fatal(err)
	}
	if tl.Expected != sendable || tl.Customers[weekstatus.Sent] != v2Sent || tl.MoreThanOneVersion != multi ||
		tl.ReceiptStates[digest.StateSent] != v2Sent || tl.ReceiptStates[digest.StateSent] > tl.Expected {
		t.Fatalf("expected %d, customers %v, receipts %v, more than one version %d; want %d sent as v2, %d under more than one",
			tl.Expected, tl.Customers, tl.ReceiptStates, tl.MoreThanOneVersion, v2Sent, multi)
	}
	// Without the other versions named (the code before), nobody is
	// counted twice.
	alone, err := weekstatus.Count(context.Background(), weekstatus.Input{Source: src, Spec: spec, AsOf: end, Latest: end, Keys: kr.Candidates, Ledger: lk})
	if err != nil || alone.MoreThanOneVersion != 0 {
		t.Fatalf("no other versions: %d more than one, %v", alone.MoreThanOneVersion, err)
	}
}
