package digest

import (
	"encoding/base64"
	"testing"
)

// BenchmarkCandidates: the keys of one identity under a keyring of two.
func BenchmarkCandidates(b *testing.B) {
	kr, err := ParseKeyring("k2:" + base64.StdEncoding.EncodeToString([]byte(canonicalSecret)) + ",k1:" + base64.StdEncoding.EncodeToString([]byte(canonicalSecret+"1")))
	if err != nil {
		b.Fatal(err)
	}
	id := Identity{Customer: "customer_8421", Week: ISOWeek{2026, 32}, Type: "weekly_activity", Version: "v3"}
	b.ReportAllocs()
	for b.Loop() {
		_ = kr.Candidates(id)
	}
}
