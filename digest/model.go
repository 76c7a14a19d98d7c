package digest

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Customer is the recipient of a digest, as the snapshot holds it.
type Customer struct {
	ID     string // the customer's id in the source; part of the business identity
	Email  string
	Name   string
	Locale string // BCP 47 tag such as "en-GB"; may be empty
	// TimeZone is the IANA zone ("Asia/Tokyo") the customer reads dates
	// in, optional: "" shows them in the run's zone (DIGEST_TZ). It changes
	// only how rows are shown; the week's bounds are always DIGEST_TZ's.
	// Part of the canonical form only when set (ValidTimeZone checks it).
	TimeZone string
	// Suppressed: the customer unsubscribed (or the address was fed back
	// after a permanent rejection). No digest is built or claimed for a
	// suppressed customer; not part of the canonical form.
	Suppressed bool
}

// Activity is one account event from the snapshot.
type Activity struct {
	OccurredAt  time.Time // when it happened; selects the week
	RecordedAt  time.Time // when the source recorded it; compared with the snapshot's as_of
	Kind        string    // e.g. "card_payment", "transfer_in"
	AmountMinor int64     // signed amount in the currency's minor units; negative is money out
	Currency    string    // ISO 4217 code, e.g. "EUR"
	Description string    // customer-visible text; untrusted
}

// Record is one customer with its activity, as a Source yields it. Activity
// may hold rows outside the week; Build keeps only the week's.
type Record struct {
	Customer Customer
	Activity []Activity
}

// Total sums one currency's activity in minor units. Amounts are integers
// end to end: a float never touches money.
type Total struct {
	Currency    string `json:"currency"`
	Count       int    `json:"count"`
	CreditMinor int64  `json:"credit_minor"` // sum of positive amounts
	DebitMinor  int64  `json:"debit_minor"`  // sum of negative amounts (zero or negative)
	NetMinor    int64  `json:"net_minor"`
}

// Digest is one customer's weekly digest, built from a fixed snapshot. Two
// builds from the same rows, in any order, are equal and have the same
// Fingerprint.
type Digest struct {
	Identity Identity
	Customer Customer
	From, To time.Time  // the week's bounds in the configured zone, To exclusive
	Activity []Activity // the week's rows in canonical order
	Totals   []Total    // one per currency, ordered by currency code
}

// Spec says which digest to build: the week in a zone, the type and the
// content version.
type Spec struct {
	Week     ISOWeek
	Location *time.Location
	Type     string
	Version  string
}

// ErrAmountOverflow is returned by Build when a currency's totals do not fit
// in 64 bits.
var ErrAmountOverflow = errors.New("amount total overflows int64")

// Build builds the digest of rec for spec: the rows whose OccurredAt lies in
// the week, in canonical order, and per-currency totals. A digest with no
// activity is valid; whether to send it is the caller's policy.
func Build(rec Record, spec Spec) (Digest, error) {
	id := Identity{Customer: rec.Customer.ID, Week: spec.Week, Type: spec.Type, Version: spec.Version}
	if err := id.Validate(); err != nil {
		return Digest{}, err
	}
	loc := spec.Location
	if loc == nil {
		loc = time.UTC
	}
	d := Digest{
		Identity: id,
		Customer: rec.Customer,
		From:     spec.Week.Start(loc),
		To:       spec.Week.End(loc),
	}
	for _, a := range rec.Activity {
		if !a.OccurredAt.Before(d.From) && a.OccurredAt.Before(d.To) {
			d.Activity = append(d.Activity, a)
		}
	}
	slices.SortFunc(d.Activity, compareActivity)

	for _, a := range d.Activity {
		i, found := slices.BinarySearchFunc(d.Totals, a.Currency, func(t Total, c string) int { return cmp.Compare(t.Currency, c) })
		if !found {
			d.Totals = slices.Insert(d.Totals, i, Total{Currency: a.Currency})
		}
		t := &d.Totals[i]
		t.Count++
		var ok bool
		if a.AmountMinor >= 0 {
			t.CreditMinor, ok = addInt64(t.CreditMinor, a.AmountMinor)
		} else {
			t.DebitMinor, ok = addInt64(t.DebitMinor, a.AmountMinor)
		}
		if ok {
			t.NetMinor, ok = addInt64(t.NetMinor, a.AmountMinor)
		}
		if !ok {
			return Digest{}, fmt.Errorf("customer %s, %s: %w", rec.Customer.ID, a.Currency, ErrAmountOverflow)
		}
	}
	return d, nil
}

func addInt64(a, b int64) (int64, bool) {
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return 0, false
	}
	return a + b, true
}

// compareActivity orders rows by every field, so the order of the input
// never shows in the digest.
func compareActivity(a, b Activity) int {
	return cmp.Or(
		a.OccurredAt.Compare(b.OccurredAt),
		a.RecordedAt.Compare(b.RecordedAt),
		cmp.Compare(a.Kind, b.Kind),
		cmp.Compare(a.Currency, b.Currency),
		cmp.Compare(a.AmountMinor, b.AmountMinor),
		cmp.Compare(a.Description, b.Description),
	)
}

// Empty reports whether the digest has no activity.
func (d *Digest) Empty() bool { return len(d.Activity) == 0 }

// canonicalFormat names the canonical encoding. Changing the encoding
// changes every fingerprint, which would quarantine every receipt of a week
// already under way: bump it only together with the content version.
const canonicalFormat = "digest-canonical-1"

// Canonical returns the canonical encoding of d: the bytes its fingerprint
// is computed over.
func (d *Digest) Canonical() []byte { return d.appendCanonical(nil) }

// Fingerprint returns "sha256:" and the lowercase hex SHA-256 of the
// canonical encoding. The ledger stores it beside the key; a different
// fingerprint under the same key means the snapshot changed under a digest
// already claimed, and the key is quarantined.
func (d *Digest) Fingerprint() string {
	var buf [2048]byte // the encoding of a typical digest, on the stack
	sum := sha256.Sum256(d.appendCanonical(buf[:0]))
	const prefix = "sha256:"
	var out [len(prefix) + 2*sha256.Size]byte
	copy(out[:], prefix)
	hex.Encode(out[len(prefix):], sum[:])
	return string(out[:])
}
