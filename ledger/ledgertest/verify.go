package ledgertest

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/weeklydigest/digest/digest"
)

// WeekKeys pages through one week's keys in one state, in key order, and
// nothing else: another state, another week. WeekStates answers for the
// week's receipts among the keys it is given, of any state, and leaves out
// keys of another week and keys no receipt has ("digest verify").
func testWeekKeysAndStates(t *testing.T, be Driver) {
	s, _, _ := fresh(t, be)
	ctx := context.Background()
	var sent []digest.Key
	for _, c := range []string{"customer_1", "customer_2", "customer_3", "customer_4", "customer_5"} {
		sent = append(sent, send(t, s, keys(t, c), "ref-"+c).Key)
	}
	slices.Sort(sent)
	failed := mustClaim(t, s, req(keys(t, "customer_6"), "fp1"))
	finish1(t, s, digest.Finish{Key: failed.Key, Token: failed.Token, State: digest.StateFailed, Reason: "550"})
	claimed := mustClaim(t, s, req(keys(t, "customer_7"), "fp1")).Key
	next := digest.Identity{Customer: "customer_1", Week: week.Next(), Type: "weekly_activity", Version: "v3"}
	otherWeek := keyring(t, "k1").Candidates(next)
	r := req(otherWeek, "fp1")
	r.Week = week.Next()
	c := mustClaim(t, s, r)
	finish1(t, s, digest.Finish{Key: c.Key, Token: c.Token, State: digest.StateSent, ProviderRef: "ref-next"})

	var got []digest.Key
	pages := 0
	for after := digest.Key(""); ; pages++ {
		page, err := s.WeekKeys(ctx, week, digest.StateSent, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 2 {
			t.Fatalf("page of %d keys, limit 2", len(page))
		}
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		after = page[len(page)-1]
	}
	if !slices.Equal(got, sent) || pages != 3 {
		t.Fatalf("sent keys of the week in %d pages: %v, want %v in 3", pages, got, sent)
	}
	if all, err := s.WeekKeys(ctx, week, digest.StateSent, "", 0); err != nil || !slices.Equal(all, sent) {
		t.Fatalf("default page: %v, %v; want %v", all, err, sent)
	}
	if f, err := s.WeekKeys(ctx, week, digest.StateFailed, "", 10); err != nil || !slices.Equal(f, []digest.Key{failed.Key}) {
		t.Fatalf("failed keys %v, %v; want %v", f, err, failed.Key)
	}
	if n, err := s.WeekKeys(ctx, week.Next().Next(), digest.StateSent, "", 10); err != nil || len(n) != 0 {
		t.Fatalf("keys of a week without receipts: %v, %v", n, err)
	}

	unknown := keys(t, "customer_never")[0]
	states, err := s.WeekStates(ctx, week, []digest.Key{sent[0], failed.Key, claimed, otherWeek[0], unknown})
	if err != nil {
		t.Fatal(err)
	}
	want := map[digest.Key]digest.State{sent[0]: digest.StateSent, failed.Key: digest.StateFailed, claimed: digest.StateClaimed}
	if !maps.Equal(states, want) {
		t.Fatalf("week states %v, want %v", states, want)
	}
	if none, err := s.WeekStates(ctx, week, nil); err != nil || len(none) != 0 {
		t.Fatalf("states of no keys: %v, %v", none, err)
	}
}
