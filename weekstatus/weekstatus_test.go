package weekstatus_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/snapshot"
	"github.com/weeklydigest/digest/weekstatus"
)

func TestOfReceipt(t *testing.T) {
	t.Parallel()
	r := func(s digest.State) *weekstatus.Receipt { return &weekstatus.Receipt{State: s} }
	for _, tc := range []struct {
		name             string
		r                *weekstatus.Receipt
		observed, pruned bool
		want             weekstatus.Outcome
	}{
		{"sent", r(digest.StateSent), true, false, weekstatus.Sent},
		{"failed", r(digest.StateFailed), false, false, weekstatus.Failed},
		{"held", r(digest.StateHeld), false, false, weekstatus.Held},
		{"quarantined", r(digest.StateQuarantined), false, false, weekstatus.Quarantined},
		{"acknowledged: closed by an operator, decided", r(digest.StateAcknowledged), false, false, weekstatus.Acknowledged},
		{"claimed", r(digest.StateClaimed), false, false, weekstatus.InFlight},
		{"retryable", r(digest.StateRetryable), false, false, weekstatus.InFlight},
		{"observed only", nil, true, false, weekstatus.ObservedNotSent},
		{"never met", nil, false, false, weekstatus.Pending},
		{"pruned week", nil, false, true, weekstatus.Pruned},
	} {
		if got := weekstatus.OfReceipt(tc.r, tc.observed, tc.pruned); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// The verdict is never complete while a customer is pending, observed
// but not sent, in flight or left out by the cutoff.
func TestVerdictNeverCompleteWithACustomerUnaccountedFor(t *testing.T) {
	t.Parallel()
	decided := weekstatus.Counts{weekstatus.Sent: 10, weekstatus.Failed: 1, weekstatus.Suppressed: 2, weekstatus.SkippedEmpty: 3, weekstatus.SkippedNotBuilt: 1, weekstatus.Pruned: 1}
	if v := (weekstatus.Week{Pinned: true, Customers: decided}).Verdict(); v != weekstatus.VerdictComplete {
		t.Fatalf("every customer decided: %s, want complete", v)
	}
	for _, o := range weekstatus.Outcomes {
		if o.Decided() {
			continue
		}
		c := weekstatus.Counts{o: 1}
		for k, n := range decided {
			c[k] += n
		}
		want := weekstatus.VerdictRemaining
		if o.NeedsReview() {
			want = weekstatus.VerdictReview
		}
		if v := (weekstatus.Week{Pinned: true, Customers: c}).Verdict(); v != want {
			t.Errorf("one customer %s: %s, want %s", o, v, want)
		}
	}
	if v := (weekstatus.Week{Pinned: true, Customers: decided, CutoffOpen: true}).Verdict(); v != weekstatus.VerdictPartial {
		t.Errorf("open cutoff: %s, want %s", v, weekstatus.VerdictPartial)
	}
	if v := (weekstatus.Week{Customers: decided}).Verdict(); v != weekstatus.VerdictNotRun {
		t.Errorf("not pinned: %s, want %s", v, weekstatus.VerdictNotRun)
	}
	if v := (weekstatus.Week{Pinned: true, Customers: decided, ReceiptsNeedReview: 1}).Verdict(); v != weekstatus.VerdictReview {
		t.Errorf("a receipt to review: %s", v)
	}
}

// Count reads a snapshot file, filtered by recorded_at as the PostgreSQL
// source is: each customer gets one outcome, and an
// early as_of shows the rows and customers it left out.
func TestCountAccountsForEveryCustomer(t *testing.T) {
	t.Parallel()
	week := digest.ISOWeek{Year: 2026, Week: 40}
	path := filepath.Join(t.TempDir(), "s.jsonl")
	var records []digest.Record
	for r := range snapshot.Synthetic(60, week, 3) {
		records = append(records, r)
	}
	if err := writeFile(path, records); err != nil {
		t.Fatal(err)
	}
	file, err := snapshot.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src := asOfSource{file} // as the PostgreSQL source reads recorded_at
	kr, err := digest.ParseKeyring("k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	if err != nil {
		t.Fatal(err)
	}
	spec := digest.Spec{Week: week, Location: time.UTC, Type: "weekly_activity", Version: "v1"}
	end := week.End(time.UTC)
	lk := &pagedLookup{states: map[digest.Key]digest.State{}, observed: map[digest.Key]bool{}}
	in := weekstatus.Input{Source: src, Spec: spec, AsOf: end, Latest: end, Keys: kr.Candidates, Ledger: lk}
	// The first sendable customer is sent, the second observed.
	n := 0
	for _, r := range records {
		if len(r.Activity) == 0 {
			continue
		}
		id := digest.Identity{Customer: r.Customer.ID, Week: week, Type: spec.Type, Version: spec.Version}
		switch n {
		case 0:
			lk.states[kr.Candidates(id)[0]] = digest.StateSent
		case 1:
			lk.observed[kr.Candidates(id)[0]] = true
		}
		n++
	}
	tl, err := weekstatus.Count(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	c := tl.Customers
	if c.Total() != 60 || c[weekstatus.Sent] != 1 || c[weekstatus.ObservedNotSent] != 1 ||
		c[weekstatus.Pending] != tl.Expected-2 || c[weekstatus.SkippedEmpty] == 0 || tl.ExcludedRows != 0 {
		t.Fatalf("counts %v (expected %d, excluded %d)", c, tl.Expected, tl.ExcludedRows)
	}

	// As of Wednesday noon, later rows are excluded and counted.
	in.AsOf = week.Start(time.UTC).Add(60 * time.Hour)
	tl, err = weekstatus.Count(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	var rows, customers, onlyLater int64
	for _, r := range records {
		late := 0
		for _, a := range r.Activity {
			if a.RecordedAt.After(in.AsOf) {
				late++
			}
		}
		if late > 0 {
			rows += int64(late)
			customers++
			if late == len(r.Activity) {
				onlyLater++
			}
		}
	}
	if tl.ExcludedRows != rows || tl.ExcludedCustomers != customers || tl.Customers[weekstatus.Excluded] != onlyLater || onlyLater == 0 {
		t.Fatalf("excluded %d rows of %d customers (%d only later), want %d of %d (%d); counts %v",
			tl.ExcludedRows, tl.ExcludedCustomers, tl.Customers[weekstatus.Excluded], rows, customers, onlyLater, tl.Customers)
	}
}

// Count holds a page of digests, never the week: it asks the ledger for
// the receipts and observed keys of at most a thousand digests a call
// (two candidate keys each, after a key rotation), and every digest of
// every page is counted once.
func TestCountLooksUpTheLedgerAPageAtATime(t *testing.T) {
	t.Parallel()
	week := digest.ISOWeek{Year: 2026, Week: 40}
	records, src := syntheticFile(t, 2600, week)
	kr, err := digest.ParseKeyring("k2:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=,k1:HxwdHhscGRoXGBUWExQREg8QDQ4LDAkKBwgFBgMEAQI=")
	if err != nil {
		t.Fatal(err)
	}
	spec := digest.Spec{Week: week, Location: time.UTC, Type: "weekly_activity", Version: "v1"}
	lk := &pagedLookup{states: map[digest.Key]digest.State{}, observed: map[digest.Key]bool{}}
	var sendable, sent, retired, observed int64
	for i, r := range records {
		if len(r.Activity) == 0 {
			continue
		}
		sendable++
		cands := kr.Candidates(digest.Identity{Customer: r.Customer.ID, Week: week, Type: spec.Type, Version: spec.Version})
		switch i % 4 {
		case 0: // sent under the current key
			lk.states[cands[0]] = digest.StateSent
			sent++
		case 1: // sent under the retired key, before the rotation
			lk.states[cands[1]] = digest.StateSent
			retired++
		case 2:
			lk.observed[cands[1]] = true
			observed++
		}
	}
	end := week.End(time.UTC)
	tl, err := weekstatus.Count(context.Background(), weekstatus.Input{Source: src, Spec: spec, AsOf: end, Latest: end, Keys: kr.Candidates, Ledger: lk})
	if err != nil {
		t.Fatal(err)
	}
	c := tl.Customers
	if tl.Expected != sendable || c[weekstatus.Sent] != sent+retired || c[weekstatus.ObservedNotSent] != observed ||
		c[weekstatus.Pending] != sendable-sent-retired-observed || tl.ReceiptStates[digest.StateSent] != sent+retired {
		t.Fatalf("expected %d, counts %v, receipts %v; want %d sendable, %d sent, %d observed", tl.Expected, c, tl.ReceiptStates, sendable, sent+retired, observed)
	}
	if sendable <= 2000 || lk.calls < 3 || lk.maxKeys > 2*1000 {
		t.Fatalf("%d sendable digests looked up in %d calls of at most %d keys; want pages of at most 1000 digests", sendable, lk.calls, lk.maxKeys)
	}
	// Observations are asked of the digests without a receipt only.
	for k := range lk.states {
		if lk.asked[k] {
			t.Fatalf("ObservedKeys asked about %s, a key with a receipt", k)
		}
	}
	if len(lk.asked) != int(2*(sendable-sent-retired)) {
		t.Fatalf("ObservedKeys asked about %d keys; want both candidates of the %d digests without a receipt", len(lk.asked), sendable-sent-retired)
	}
	// A week whose every digest has a receipt asks no observation at all.
	done := &pagedLookup{states: map[digest.Key]digest.State{}}
	for _, r := range records {
		done.states[kr.Candidates(digest.Identity{Customer: r.Customer.ID, Week: week, Type: spec.Type, Version: spec.Version})[0]] = digest.StateSent
	}
	tl, err = weekstatus.Count(context.Background(), weekstatus.Input{Source: src, Spec: spec, AsOf: end, Latest: end, Keys: kr.Candidates, Ledger: done})
	if err != nil {
		t.Fatal(err)
	}
	if tl.Customers[weekstatus.Sent] != sendable || done.observedCalls != 0 {
		t.Fatalf("a finished week: %v, %d ObservedKeys calls; want %d sent and none", tl.Customers, done.observedCalls, sendable)
	}

	// A look-up that fails ends the count with its error, whichever page.
	for _, at := range []int{1, 2, lk.calls} {
		down := errors.New("ledger down")
		failing := &pagedLookup{states: lk.states, observed: lk.observed, failAt: at, fail: down}
		if _, err := weekstatus.Count(context.Background(), weekstatus.Input{Source: src, Spec: spec, AsOf: end, Latest: end, Keys: kr.Candidates, Ledger: failing}); !errors.Is(err, down) {
			t.Errorf("look-up %d failing: %v; want its error", at, err)
		}
	}
}

// With an early cutoff, Count reads the source as of the cutoff and as of
// now side by side instead of holding the later read's customers in a
// map: the later read never runs more than a page (1,000) ahead. A customer
// that is a bad record in either read, and a later read in another order,
// still give the counts a map would: each customer's rows recorded after
// the cutoff, from the later read when it read that customer well.
func TestCountReadsTheLaterCutoffBesideTheEarlierOne(t *testing.T) {
	t.Parallel()
	week := digest.ISOWeek{Year: 2026, Week: 40}
	var records []digest.Record
	for r := range snapshot.Synthetic(3000, week, 3) {
		records = append(records, r)
	}
	kr, err := digest.ParseKeyring("k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	if err != nil {
		t.Fatal(err)
	}
	spec := digest.Spec{Week: week, Location: time.UTC, Type: "weekly_activity", Version: "v1"}
	const page = 1000 // weekstatus's countPage: what the later read may hold ahead
	asOf, latest := week.Start(time.UTC).Add(60*time.Hour), week.End(time.UTC)
	// Customers with rows on both sides of the cutoff, and with rows only
	// after it, to be made bad records in one read or the other.
	var both, onlyAfter []string
	for _, r := range records {
		before := 0
		for _, a := range r.Activity {
			if !a.RecordedAt.After(asOf) {
				before++
			}
		}
		switch {
		case before > 0 && before < len(r.Activity):
			both = append(both, r.Customer.ID)
		case before == 0 && len(r.Activity) > 0:
			onlyAfter = append(onlyAfter, r.Customer.ID)
		}
	}
	if len(both) < 6 || len(onlyAfter) < 3 {
		t.Fatalf("%d customers with rows on both sides, %d with rows only after: the test needs more", len(both), len(onlyAfter))
	}
	// want is what the counts must be: a customer's excluded rows are its
	// rows in the later read (none when it is a bad record there) less
	// those as of the cutoff, for each customer the earlier read read well.
	want := func(bad map[time.Time]map[string]bool) (rows, customers, excluded int64) {
		for _, r := range records {
			if bad[asOf][r.Customer.ID] {
				continue
			}
			before, later := 0, 0
			for _, a := range r.Activity {
				if !a.RecordedAt.After(asOf) {
					before++
				}
			}
			if !bad[latest][r.Customer.ID] {
				later = len(r.Activity)
			}
			if later > before {
				rows += int64(later - before)
				customers++
				if before == 0 {
					excluded++
				}
			}
		}
		return rows, customers, excluded
	}
	set := func(ids ...string) map[string]bool {
		m := map[string]bool{}
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		bad      map[time.Time]map[string]bool
		reversed bool
		maxAhead int // -1: unbounded
	}{
		{name: "every record read well", maxAhead: page + 2},
		{name: "bad as of the cutoff, good later", bad: map[time.Time]map[string]bool{asOf: set(both[0], onlyAfter[0])}, maxAhead: page + 4},
		{name: "good as of the cutoff, bad later", bad: map[time.Time]map[string]bool{latest: set(both[1], onlyAfter[1])}, maxAhead: -1},
		{name: "bad in both", bad: map[time.Time]map[string]bool{asOf: set(both[2]), latest: set(both[2])}, maxAhead: page + 4},
		{name: "two bad in a row, then one bad later", bad: map[time.Time]map[string]bool{asOf: set(both[3], both[4]), latest: set(both[4], onlyAfter[2])}, maxAhead: -1},
		{name: "the later read in another order", reversed: true, maxAhead: -1},
	} {
		src := &twoReads{records: records, bad: tc.bad, reversed: map[time.Time]bool{latest: tc.reversed}, yielded: map[time.Time]int{}, earlier: asOf, latest: latest}
		lk := &pagedLookup{states: map[digest.Key]digest.State{}, observed: map[digest.Key]bool{}}
		tl, err := weekstatus.Count(context.Background(), weekstatus.Input{Source: src, Spec: spec, AsOf: asOf, Latest: latest, Keys: kr.Candidates, Ledger: lk})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		rows, customers, excluded := want(tc.bad)
		if tl.ExcludedRows != rows || tl.ExcludedCustomers != customers || tl.Customers[weekstatus.Excluded] != excluded || rows == 0 {
			t.Errorf("%s: excluded %d rows of %d customers (%d with nothing before the cutoff); want %d of %d (%d)",
				tc.name, tl.ExcludedRows, tl.ExcludedCustomers, tl.Customers[weekstatus.Excluded], rows, customers, excluded)
		}
		if tc.maxAhead >= 0 && src.ahead > tc.maxAhead {
			t.Errorf("%s: the later read ran %d records ahead of the earlier one; want at most %d", tc.name, src.ahead, tc.maxAhead)
		}
	}
}
