package digest_test

import (
	"context"
	"encoding/base64"
	"path/filepath"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender"
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

// BenchmarkBuildRenderMessage adds to BenchmarkBuildRender what the run
// does next for a digest: its keys (a keyring of two), its fingerprint,
// and the RFC 5322 message the mailer sends (sender.Envelope.Render, the
// mailer's own build). allocs/op and B/op are per digest.
func BenchmarkBuildRenderMessage(b *testing.B) {
	recs, spec := exampleRecords(b)
	r, err := digest.NewRenderer()
	if err != nil {
		b.Fatal(err)
	}
	kr, err := digest.ParseKeyring("k2:" + base64.StdEncoding.EncodeToString([]byte("bench-secret-0123456789abcdef-0123")) + ",k1:" + base64.StdEncoding.EncodeToString([]byte("bench-secret-0123456789abcdef-0124")))
	if err != nil {
		b.Fatal(err)
	}
	env, err := sender.NewEnvelope(digest.Address{Name: "Weekly digest", Email: "digest@example.com"}, "<mailto:unsubscribe@example.com>")
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		d, err := digest.Build(recs[i%len(recs)], spec)
		if err != nil {
			b.Fatal(err)
		}
		_ = d.Fingerprint()
		keys := kr.Candidates(d.Identity)
		m, err := r.Message(&d, keys[0], "")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := env.Render(m, now); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
