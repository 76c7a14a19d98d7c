package ledgertest

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// benchStore is a migrated store on a fresh database with one connection.
func benchStore(b *testing.B, be Driver) ledger.Store {
	b.Helper()
	cfg := be.Fresh(b)
	if cfg.URL != "" {
		u, err := url.Parse(cfg.URL)
		if err != nil {
			b.Fatal(err)
		}
		q := u.Query()
		q.Set("pool_max_conns", "1")
		u.RawQuery = q.Encode()
		cfg.URL = u.String()
	}
	s := open(b, be, cfg, nil)
	if err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	// As a run starts: on PostgreSQL this makes the week's partition.
	if _, err := s.StartWeek(context.Background(), digest.SnapshotPin{Type: "bench", Week: week, Version: "v1"}, time.Now()); err != nil {
		b.Fatal(err)
	}
	return s
}

func benchKeys(n int) [][]digest.Key {
	k := make([][]digest.Key, n)
	for i := range k {
		k[i] = []digest.Key{digest.Key(fmt.Sprintf("k1:%064x", i))}
	}
	return k
}

// BenchmarkClaimSent measures d: claim one key, then mark it sent; one call each.
func BenchmarkClaimSent(b *testing.B, be Driver) {
	s := benchStore(b, be)
	ctx := context.Background()
	keys := benchKeys(b.N)
	b.ResetTimer()
	for i := range b.N {
		res, err := s.Claim(ctx, []digest.ClaimRequest{{Keys: keys[i], Fingerprint: "fp", Week: week, RunID: "bench", Lease: time.Minute}})
		if err != nil || res[0].Outcome != digest.OutcomeClaimed {
			b.Fatalf("claim: %v %v", res, err)
		}
		errs, err := s.Finish(ctx, []digest.Finish{{Key: res[0].Key, Token: res[0].Token, State: digest.StateSent, ProviderRef: "ref", Week: week}})
		if err != nil || errs[0] != nil {
			b.Fatalf("finish: %v %v", errs, err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}

// BenchmarkClaimSentBatch100 measures d: claim 100 keys in one call, then mark them
// sent in one call. One op is 100 pairs.
func BenchmarkClaimSentBatch100(b *testing.B, be Driver) {
	const n = 100
	s := benchStore(b, be)
	ctx := context.Background()
	keys := benchKeys(b.N * n)
	reqs := make([]digest.ClaimRequest, n)
	fins := make([]digest.Finish, n)
	b.ResetTimer()
	for i := range b.N {
		for j := range reqs {
			reqs[j] = digest.ClaimRequest{Keys: keys[i*n+j], Fingerprint: "fp", Week: week, RunID: "bench", Lease: time.Minute}
		}
		res, err := s.Claim(ctx, reqs)
		if err != nil {
			b.Fatal(err)
		}
		for j, r := range res {
			if r.Outcome != digest.OutcomeClaimed {
				b.Fatalf("claim %d: %v", j, r.Outcome)
			}
			fins[j] = digest.Finish{Key: r.Key, Token: r.Token, State: digest.StateSent, ProviderRef: "ref", Week: week}
		}
		errs, err := s.Finish(ctx, fins)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range errs {
			if e != nil {
				b.Fatal(e)
			}
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "pairs/s")
}
