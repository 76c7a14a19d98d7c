package digest

import (
	"testing"
	"time"
)

// BenchmarkFingerprintParts: the keyed checks each claim stores beside the
// fingerprint, for BenchmarkFingerprint's digest.
func BenchmarkFingerprintParts(b *testing.B) {
	kr, err := ParseKeyring("k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 11, 24, 10, 30, 0, 123, time.UTC)
	d := &Digest{Identity: Identity{Customer: "cust_0001", Week: ISOWeek{2026, 48}, Type: "weekly_activity", Version: "v1"},
		Customer: Customer{ID: "cust_0001", Email: "ada@example.com", Name: "Ada Lovelace", Locale: "en-GB"}, From: at, To: at}
	for range 5 {
		d.Activity = append(d.Activity, Activity{OccurredAt: at, RecordedAt: at, Kind: "card_payment", AmountMinor: -450, Currency: "EUR", Description: "Coffee shop"})
	}
	d.Totals = []Total{{Currency: "EUR", Count: 5, DebitMinor: -2250, NetMinor: -2250}}
	b.ReportAllocs()
	for b.Loop() {
		_ = kr.FingerprintParts(d)
	}
}
