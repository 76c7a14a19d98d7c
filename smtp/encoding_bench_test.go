package smtp

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/snapshot"
)

// BenchmarkEncoding writes the example's rendered digests (text + HTML)
// with each transfer encoding for the parts: wire-B/msg is the size of
// the message as written into DATA (before dot-stuffing).
func BenchmarkEncoding(b *testing.B) {
	env, err := NewEnvelope(digest.Address{Name: "Weekly Digest", Email: "digest@example.com"}, "")
	if err != nil {
		b.Fatal(err)
	}
	var msgs []*digest.Message
	for _, d := range SampleDigests(b) {
		out, err := digest.Render(&d)
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, &digest.Message{Key: digest.Key("k1:" + string(bytes.Repeat([]byte{'a'}, 64))),
			To: digest.Address{Name: d.Customer.Name, Email: "ada@example.net"}, Subject: out.Subject, Text: out.Text, HTML: out.HTML})
	}
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for _, enc := range []gomail.Encoding{gomail.EncodingQP, gomail.EncodingB64, gomail.NoEncoding} {
		b.Run(string(enc), func(b *testing.B) {
			b.ReportAllocs()
			var buf bytes.Buffer
			total, n := 0, 0
			for b.Loop() {
				msg, err := env.build(msgs[n%len(msgs)], now)
				if err != nil {
					b.Fatal(err)
				}
				for _, p := range msg.GetParts() {
					p.SetEncoding(enc)
				}
				buf.Reset()
				if _, err := msg.WriteTo(&buf); err != nil {
					b.Fatal(err)
				}
				total += buf.Len()
				n++
			}
			b.ReportMetric(float64(total)/float64(n), "wire-B/msg")
		})
	}
}

// SampleDigests builds the digests of examples/snapshot.jsonl for
// 2026-W48 (its unsuppressed customers), for benchmarks.
func SampleDigests(tb testing.TB) []digest.Digest {
	tb.Helper()
	src, err := snapshot.OpenFile(filepath.Join("..", "examples", "snapshot.jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	week, err := digest.ParseISOWeek("2026-W48")
	if err != nil {
		tb.Fatal(err)
	}
	spec := digest.Spec{Week: week, Location: time.UTC, Type: "weekly_activity", Version: "v1"}
	var ds []digest.Digest
	for rec, err := range src.Records(context.Background(), digest.SourceQuery{Week: week, Location: time.UTC}) {
		if err != nil {
			tb.Fatal(err)
		}
		if rec.Customer.Suppressed {
			continue
		}
		d, err := digest.Build(rec, spec)
		if err != nil {
			tb.Fatal(err)
		}
		ds = append(ds, d)
	}
	return ds
}
