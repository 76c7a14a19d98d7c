package digest_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/snapshot"
)

// exampleRecords returns the unsuppressed records of examples/snapshot.jsonl
// for 2026-W48 and the spec they are built with.
func exampleRecords(tb testing.TB) ([]digest.Record, digest.Spec) {
	tb.Helper()
	src, err := snapshot.OpenFile(filepath.Join("..", "examples", "snapshot.jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	week, err := digest.ParseISOWeek("2026-W48")
	if err != nil {
		tb.Fatal(err)
	}
	var recs []digest.Record
	for rec, err := range src.Records(context.Background(), digest.SourceQuery{Week: week, Location: time.UTC}) {
		if err != nil {
			tb.Fatal(err)
		}
		if !rec.Customer.Suppressed {
			recs = append(recs, rec)
		}
	}
	return recs, digest.Spec{Week: week, Location: time.UTC, Type: "weekly_activity", Version: "v1"}
}

// BenchmarkBuildRender builds and renders the example's digests in turn:
// allocs/op and B/op are per digest.
func BenchmarkBuildRender(b *testing.B) {
	recs, spec := exampleRecords(b)
	r, err := digest.NewRenderer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		d, err := digest.Build(recs[i%len(recs)], spec)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Render(&d); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
