package digest

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// canonical* are the reference of the canonical encoding: Digest with
// explicit JSON names, as encoding/json writes them (struct fields in
// declaration order, no maps, no floats; instants in UTC with
// nanoseconds). appendCanonical must write exactly these bytes.
type canonicalDigest struct {
	Format   string              `json:"format"`
	Type     string              `json:"type"`
	Version  string              `json:"version"`
	Week     string              `json:"week"`
	From     string              `json:"from"`
	To       string              `json:"to"`
	Customer canonicalCustomer   `json:"customer"`
	Activity []canonicalActivity `json:"activity"`
	Totals   []Total             `json:"totals"`
}

type canonicalCustomer struct {
	ID       string `json:"id"`
	Email    string `json:"email"`
	Name     string `json:"name"`
	Locale   string `json:"locale"`
	TimeZone string `json:"time_zone,omitempty"`
}

type canonicalActivity struct {
	OccurredAt  string `json:"occurred_at"`
	RecordedAt  string `json:"recorded_at"`
	Kind        string `json:"kind"`
	AmountMinor int64  `json:"amount_minor"`
	Currency    string `json:"currency"`
	Description string `json:"description"`
}

func utc(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// canonicalJSON is the canonical encoding of d by encoding/json.
func canonicalJSON(t testing.TB, d *Digest) []byte {
	c := canonicalDigest{
		Format:  canonicalFormat,
		Type:    d.Identity.Type,
		Version: d.Identity.Version,
		Week:    d.Identity.Week.String(),
		From:    utc(d.From),
		To:      utc(d.To),
		Customer: canonicalCustomer{
			ID: d.Customer.ID, Email: d.Customer.Email, Name: d.Customer.Name, Locale: d.Customer.Locale, TimeZone: d.Customer.TimeZone,
		},
		Activity: make([]canonicalActivity, len(d.Activity)),
		Totals:   d.Totals,
	}
	for i, a := range d.Activity {
		c.Activity[i] = canonicalActivity{
			OccurredAt: utc(a.OccurredAt), RecordedAt: utc(a.RecordedAt), Kind: a.Kind,
			AmountMinor: a.AmountMinor, Currency: a.Currency, Description: a.Description,
		}
	}
	if c.Totals == nil {
		c.Totals = []Total{}
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var canonicalStrings = []string{"", "plain", `"quoted" \back\slash/`, "<b>&amp;</b>", "\x00\x01\b\f\n\r\t\x1f\x7f", "\u2028\u2029\u2027\u202a", "\xff\xfe ok \xc3", "é€山田 😀", "\ufffd"}

// randomDigest draws a digest from strs and rng: every string field, zero
// to four activities and totals, instants in zones and far years.
func randomDigest(rng *rand.Rand, strs []string) *Digest {
	s := func() string { return strs[rng.IntN(len(strs))] }
	zones := []*time.Location{time.UTC, time.FixedZone("x", -11*3600), time.FixedZone("y", 14*3600+1800)}
	at := func() time.Time {
		return time.Unix(rng.Int64N(400e9)-62e9, rng.Int64N(1e9)*int64(rng.IntN(2))).In(zones[rng.IntN(len(zones))])
	}
	n := func() int64 {
		return []int64{0, 1, -1, math.MaxInt64, math.MinInt64, rng.Int64()}[rng.IntN(6)]
	}
	d := &Digest{
		Identity: Identity{Customer: s(), Week: ISOWeek{rng.IntN(10000), rng.IntN(54)}, Type: s(), Version: s()},
		Customer: Customer{ID: s(), Email: s(), Name: s(), Locale: s(), TimeZone: s()},
		From:     at(), To: at(),
	}
	for range rng.IntN(5) {
		d.Activity = append(d.Activity, Activity{OccurredAt: at(), RecordedAt: at(), Kind: s(), AmountMinor: n(), Currency: s(), Description: s()})
	}
	for range rng.IntN(5) {
		d.Totals = append(d.Totals, Total{Currency: s(), Count: int(n()), CreditMinor: n(), DebitMinor: n(), NetMinor: n()})
	}
	return d
}

// The hand-written canonical encoding is encoding/json's, byte for byte.
func TestCanonicalIsEncodingJSON(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		d := randomDigest(rng, canonicalStrings)
		if got, want := d.Canonical(), canonicalJSON(t, d); string(got) != string(want) {
			t.Fatalf("Canonical\n%s\nencoding/json\n%s", got, want)
		}
	}
	var every []byte
	for r := rune(0); r < 0x3000; r++ {
		every = append(every, string(r)...)
	}
	d := &Digest{Customer: Customer{Name: string(every)}}
	if got, want := d.Canonical(), canonicalJSON(t, d); string(got) != string(want) {
		t.Fatalf("Canonical of every rune below U+3000 differs from encoding/json")
	}
}

func FuzzCanonical(f *testing.F) {
	f.Add(uint64(0), "", "")
	f.Add(uint64(1), "<\u2028\"\\", "\xff")
	f.Fuzz(func(t *testing.T, seed uint64, a, b string) {
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		d := randomDigest(rng, append([]string{a, b}, canonicalStrings...))
		if got, want := d.Canonical(), canonicalJSON(t, d); string(got) != string(want) {
			t.Fatalf("Canonical\n%s\nencoding/json\n%s", got, want)
		}
	})
}

// BenchmarkFingerprint: a digest of five activities and one total.
func BenchmarkFingerprint(b *testing.B) {
	at := time.Date(2026, 11, 24, 10, 30, 0, 123, time.UTC)
	d := &Digest{Identity: Identity{Customer: "cust_0001", Week: ISOWeek{2026, 48}, Type: "weekly_activity", Version: "v1"},
		Customer: Customer{ID: "cust_0001", Email: "ada@example.com", Name: "Ada Lovelace", Locale: "en-GB"}, From: at, To: at}
	for range 5 {
		d.Activity = append(d.Activity, Activity{OccurredAt: at, RecordedAt: at, Kind: "card_payment", AmountMinor: -450, Currency: "EUR", Description: "Coffee shop"})
	}
	d.Totals = []Total{{Currency: "EUR", Count: 5, DebitMinor: -2250, NetMinor: -2250}}
	b.ReportAllocs()
	for b.Loop() {
		_ = d.Fingerprint()
	}
}

func TestAppendJSONWeek(t *testing.T) {
	t.Parallel()
	for _, w := range []ISOWeek{{2026, 48}, {1, 1}, {999, 5}, {9999, 53}, {0, 0}, {10000, 1}, {-1, 1}, {2026, 100}, {2026, -3}} {
		if got, want := string(appendJSONWeek(nil, w)), `"`+w.String()+`"`; got != want {
			t.Errorf("appendJSONWeek(%v) = %s, want %s", w, got, want)
		}
	}
}
