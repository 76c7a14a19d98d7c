package snapshot_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/snapshot"
)

// Both sources read only the customers a retry pass names, within the
// shard, and nothing for an empty list; ids they do not hold are ignored.
func TestSourcesReadOnlyTheNamedCustomers(t *testing.T) {
	t.Parallel()
	const n = 120
	path := filepath.Join(t.TempDir(), "snapshot.jsonl")
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.WriteJSONL(fh, snapshot.Synthetic(n, pgWeek, 7)); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	file, err := snapshot.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for r := range snapshot.Synthetic(n, pgWeek, 7) {
		ids = append(ids, r.Customer.ID)
	}
	slices.Sort(ids)
	named := []string{ids[3], ids[40], ids[41], ids[99], "zz-not-a-customer"}
	sources := map[string]digest.Source{"jsonl": file, "postgres": snapshot.NewPostgres(seededPool(t, n), 10)}
	for name, src := range sources {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			q := digest.SourceQuery{Week: pgWeek, Location: time.UTC, AsOf: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Customers: named}
			if got := recordIDs(t, src, q); !slices.Equal(got, named[:4]) {
				t.Fatalf("read %v, want %v", got, named[:4])
			}
			q.Shard = digest.Shard{Index: digest.ShardOf(ids[40], 2), Count: 2}
			var want []string
			for _, id := range named[:4] {
				if q.Shard.Has(id) {
					want = append(want, id)
				}
			}
			if got := recordIDs(t, src, q); !slices.Equal(got, want) {
				t.Fatalf("shard %s: read %v, want %v", q.Shard, got, want)
			}
			q.Customers = []string{}
			if got := recordIDs(t, src, q); len(got) != 0 {
				t.Fatalf("no customers named: read %v", got)
			}
		})
	}
}

func recordIDs(t *testing.T, src digest.Source, q digest.SourceQuery) []string {
	t.Helper()
	recs, bad := collect(t, src, q)
	if len(bad) > 0 {
		t.Fatalf("bad records: %v", bad)
	}
	var out []string
	for _, r := range recs {
		out = append(out, r.Customer.ID)
	}
	return out
}
