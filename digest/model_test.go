package digest_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
)

func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func testSpec(t *testing.T) digest.Spec {
	t.Helper()
	return digest.Spec{Week: mustWeek(t, "2026-W48"), Location: time.UTC, Type: "weekly_activity", Version: "v3"}
}

// testRecord has rows in two currencies, two rows at the same instant, and
// rows on both sides of each bound of 2026-W48.
func testRecord(t *testing.T) digest.Record {
	t.Helper()
	row := func(occ string, kind string, amount int64, cur, desc string) digest.Activity {
		o := at(t, occ)
		return digest.Activity{OccurredAt: o, RecordedAt: o.Add(2 * time.Second), Kind: kind, AmountMinor: amount, Currency: cur, Description: desc}
	}
	return digest.Record{
		Customer: digest.Customer{ID: "customer_8421", Email: "zoe@example.com", Name: "Zoë", Locale: "de-DE"},
		Activity: []digest.Activity{
			row("2026-11-22T23:59:59.999999999Z", "card_payment", -1, "EUR", "before the week"),
			row("2026-11-23T00:00:00Z", "card_payment", -450, "EUR", "first instant"),
			row("2026-11-24T10:00:00Z", "transfer_in", 285000, "EUR", "salary"),
			row("2026-11-24T10:00:00Z", "fee", -200, "EUR", "same instant"),
			row("2026-11-25T10:00:00Z", "card_payment", -1280, "JPY", "ramen"),
			row("2026-11-26T10:00:00Z", "refund", 1280, "JPY", "ramen refund"),
			row("2026-11-29T23:59:59.999999999Z", "interest", 12, "EUR", "last instant"),
			row("2026-11-30T00:00:00Z", "card_payment", -99, "EUR", "after the week"),
		},
	}
}

func mustBuild(t *testing.T, rec digest.Record, spec digest.Spec) digest.Digest {
	t.Helper()
	d, err := digest.Build(rec, spec)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestBuildFiltersAndTotals(t *testing.T) {
	t.Parallel()
	d := mustBuild(t, testRecord(t), testSpec(t))
	if len(d.Activity) != 6 {
		t.Fatalf("kept %d rows, want the 6 in [Mon 00:00, next Mon 00:00)", len(d.Activity))
	}
	for i, a := range d.Activity {
		if a.Description == "before the week" || a.Description == "after the week" {
			t.Errorf("row %d %q is outside the week", i, a.Description)
		}
		if i > 0 && a.OccurredAt.Before(d.Activity[i-1].OccurredAt) {
			t.Errorf("rows not in time order at %d", i)
		}
	}
	if d.Activity[0].Description != "first instant" || d.Activity[5].Description != "last instant" {
		t.Errorf("bounds: first %q, last %q", d.Activity[0].Description, d.Activity[5].Description)
	}
	want := []digest.Total{
		{Currency: "EUR", Count: 4, CreditMinor: 285012, DebitMinor: -650, NetMinor: 284362},
		{Currency: "JPY", Count: 2, CreditMinor: 1280, DebitMinor: -1280, NetMinor: 0},
	}
	if len(d.Totals) != len(want) {
		t.Fatalf("Totals = %+v", d.Totals)
	}
	for i := range want {
		if d.Totals[i] != want[i] {
			t.Errorf("Totals[%d] = %+v, want %+v", i, d.Totals[i], want[i])
		}
	}
	if !d.From.Equal(at(t, "2026-11-23T00:00:00Z")) || !d.To.Equal(at(t, "2026-11-30T00:00:00Z")) {
		t.Errorf("From %s, To %s", d.From, d.To)
	}
	if d.Identity.Canonical() != "customer_8421|2026-W48|weekly_activity|v3" || d.Empty() {
		t.Errorf("Identity %q, Empty %v", d.Identity.Canonical(), d.Empty())
	}
}

func TestBuildZoneAndEmpty(t *testing.T) {
	t.Parallel()
	spec := testSpec(t)
	spec.Location = mustLoad(t, "Asia/Tokyo")
	// 2026-11-22T23:59:59Z is Monday 08:59 in Tokyo; 2026-11-29T23:59Z is
	// already the next Monday there.
	d := mustBuild(t, testRecord(t), spec)
	for _, a := range d.Activity {
		if a.Description == "last instant" {
			t.Error("a row of the next Tokyo week was kept")
		}
	}
	if d.Activity[0].Description != "before the week" {
		t.Errorf("first row %q, want the UTC Sunday row that is Monday in Tokyo", d.Activity[0].Description)
	}

	rec := testRecord(t)
	rec.Activity = rec.Activity[:1]
	e := mustBuild(t, rec, testSpec(t))
	if !e.Empty() || len(e.Totals) != 0 {
		t.Errorf("digest with no row in the week: %+v", e)
	}
	none := mustBuild(t, digest.Record{Customer: rec.Customer}, testSpec(t))
	if e.Fingerprint() != none.Fingerprint() {
		t.Error("an empty digest's fingerprint depends on rows outside the week")
	}
}

func TestBuildErrors(t *testing.T) {
	t.Parallel()
	rec := testRecord(t)
	rec.Customer.ID = "bad|id"
	if _, err := digest.Build(rec, testSpec(t)); !errors.Is(err, digest.ErrInvalidIdentity) {
		t.Errorf("bad customer id: %v", err)
	}
	big := func(amounts ...int64) digest.Record {
		r := digest.Record{Customer: digest.Customer{ID: "c1"}}
		for i, a := range amounts {
			r.Activity = append(r.Activity, digest.Activity{
				OccurredAt: at(t, "2026-11-24T10:00:00Z").Add(time.Duration(i) * time.Second), Kind: "k", AmountMinor: a, Currency: "EUR",
			})
		}
		return r
	}
	for _, tt := range []struct {
		name    string
		rec     digest.Record
		wantErr bool
	}{
		{"credits overflow", big(math.MaxInt64, 1), true},
		{"debits overflow", big(math.MinInt64, -1), true},
		{"net overflow", big(math.MaxInt64, math.MinInt64, math.MaxInt64, -1, 1), true},
		{"extremes fit", big(math.MaxInt64, math.MinInt64), false},
	} {
		_, err := digest.Build(tt.rec, testSpec(t))
		if got := errors.Is(err, digest.ErrAmountOverflow); got != tt.wantErr {
			t.Errorf("%s: Build error %v, want overflow %v", tt.name, err, tt.wantErr)
		}
	}
}

func TestFingerprintIgnoresInputOrder(t *testing.T) {
	t.Parallel()
	rec := testRecord(t)
	d := mustBuild(t, rec, testSpec(t))
	want := d.Fingerprint()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		rec.Activity = append([]digest.Activity(nil), rec.Activity...)
		rng.Shuffle(len(rec.Activity), func(i, j int) { rec.Activity[i], rec.Activity[j] = rec.Activity[j], rec.Activity[i] })
		// The same instant in another zone is the same row.
		k := rng.IntN(len(rec.Activity))
		rec.Activity[k].OccurredAt = rec.Activity[k].OccurredAt.In(time.FixedZone("X", 3600*(rng.IntN(25)-12)))
		if got := mustBuild(t, rec, testSpec(t)); got.Fingerprint() != want {
			t.Fatalf("shuffle %d: fingerprint %s, want %s", i, got.Fingerprint(), want)
		}
	}
	if len(want) != len("sha256:")+64 || want[:7] != "sha256:" {
		t.Errorf("Fingerprint = %q", want)
	}
}

func TestFingerprintSensitivity(t *testing.T) {
	t.Parallel()
	base := mustBuild(t, testRecord(t), testSpec(t))
	seen := map[string]string{base.Fingerprint(): "base"}
	type change struct {
		name string
		rec  func(*digest.Record)
		spec func(*digest.Spec)
	}
	changes := []change{
		{name: "customer id", rec: func(r *digest.Record) { r.Customer.ID = "customer_8422" }},
		{name: "email", rec: func(r *digest.Record) { r.Customer.Email = "zoe2@example.com" }},
		{name: "name", rec: func(r *digest.Record) { r.Customer.Name = "Zoe" }},
		{name: "locale", rec: func(r *digest.Record) { r.Customer.Locale = "de-AT" }},
		{name: "week", spec: func(s *digest.Spec) { s.Week = s.Week.Next() }},
		{name: "zone", spec: func(s *digest.Spec) { s.Location = time.FixedZone("UTC+1", 3600) }},
		{name: "type", spec: func(s *digest.Spec) { s.Type = "weekly_summary" }},
		{name: "version", spec: func(s *digest.Spec) { s.Version = "v4" }},
		{name: "extra row", rec: func(r *digest.Record) { r.Activity = append(r.Activity, r.Activity[2]) }},
		{name: "row dropped", rec: func(r *digest.Record) { r.Activity = r.Activity[2:] }},
	}
	// Every field of every row in the week.
	for i := 1; i <= 6; i++ {
		for _, f := range []struct {
			field string
			edit  func(*digest.Activity)
		}{
			{"occurred_at", func(a *digest.Activity) { // by 1ns, staying in the week
				if a.OccurredAt.Weekday() == time.Sunday {
					a.OccurredAt = a.OccurredAt.Add(-time.Nanosecond)
				} else {
					a.OccurredAt = a.OccurredAt.Add(time.Nanosecond)
				}
			}},
			{"recorded_at", func(a *digest.Activity) { a.RecordedAt = a.RecordedAt.Add(time.Nanosecond) }},
			{"kind", func(a *digest.Activity) { a.Kind += "_x" }},
			{"amount", func(a *digest.Activity) { a.AmountMinor++ }},
			{"currency", func(a *digest.Activity) { a.Currency = "CHF" }},
			{"description", func(a *digest.Activity) { a.Description += "." }},
		} {
			changes = append(changes, change{
				name: "row " + string(rune('0'+i)) + " " + f.field,
				rec:  func(r *digest.Record) { f.edit(&r.Activity[i]) },
			})
		}
	}
	for _, c := range changes {
		rec, spec := testRecord(t), testSpec(t)
		if c.rec != nil {
			c.rec(&rec)
		}
		if c.spec != nil {
			c.spec(&spec)
		}
		d := mustBuild(t, rec, spec)
		fp := d.Fingerprint()
		if prev, dup := seen[fp]; dup {
			t.Errorf("%s: same fingerprint as %s", c.name, prev)
		}
		seen[fp] = c.name
	}
	// Rows outside the week are not part of the digest.
	rec := testRecord(t)
	rec.Activity[0].Description = "changed"
	rec.Activity[7].AmountMinor = 1
	if d := mustBuild(t, rec, testSpec(t)); d.Fingerprint() != base.Fingerprint() {
		t.Error("a change outside the week changed the fingerprint")
	}
	// Same inputs, same bytes.
	if d := mustBuild(t, testRecord(t), testSpec(t)); string(d.Canonical()) != string(base.Canonical()) {
		t.Error("Canonical is not deterministic")
	}
}
