package digest

import (
	"slices"
	"strings"
	"testing"
)

// Issue 35: the parts of a fingerprint tell which of address, name and
// content changed, and show neither value.
func TestFingerprintPartsTellWhatChanged(t *testing.T) {
	t.Parallel()
	kr, err := ParseKeyring("k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
	if err != nil {
		t.Fatal(err)
	}
	base := Digest{Identity: Identity{Customer: "c1", Week: ISOWeek{Year: 2026, Week: 48}, Type: "weekly_activity", Version: "v1"},
		Customer: Customer{ID: "c1", Email: "ann@example.com", Name: "Ann", Locale: "en-GB"},
		Activity: []Activity{{Kind: "card_payment", AmountMinor: -450, Currency: "EUR", Description: "Bakery"}}}
	stored := kr.FingerprintParts(&base)
	if strings.Contains(stored, "ann") || strings.Contains(stored, "Ann") {
		t.Fatalf("the parts show a value: %s", stored)
	}
	for _, tc := range []struct {
		name   string
		change func(d *Digest)
		want   []string
	}{
		{"nothing", func(*Digest) {}, nil},
		{"address, case only", func(d *Digest) { d.Customer.Email = "Ann@Example.com" }, nil},
		{"address", func(d *Digest) { d.Customer.Email = "ann@example.org" }, []string{"address"}},
		{"name", func(d *Digest) { d.Customer.Name = "Anne" }, []string{"name"}},
		{"content", func(d *Digest) {
			d.Activity = append(d.Activity, Activity{Kind: "fee", AmountMinor: -1, Currency: "EUR"})
		}, []string{"content"}},
		{"locale is content", func(d *Digest) { d.Customer.Locale = "de-DE" }, []string{"content"}},
		{"address and content", func(d *Digest) { d.Customer.Email = "x@example.com"; d.Activity = nil }, []string{"address", "content"}},
	} {
		d := base
		d.Activity = slices.Clone(base.Activity)
		tc.change(&d)
		if got := ChangedParts(stored, kr.FingerprintParts(&d)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: changed %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := ChangedParts("", stored); got != nil {
		t.Errorf("parts not recorded: changed %v, want nil", got)
	}
}
