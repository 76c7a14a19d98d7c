package smtp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender"
	"github.com/weeklydigest/digest/snapshot"
)

// sampleMessages returns the example's digests rendered as messages, and
// their envelope.
func sampleMessages(b *testing.B) (sender.Envelope, []*digest.Message) {
	env, err := sender.NewEnvelope(digest.Address{Name: "Weekly Digest", Email: "digest@example.com"}, "")
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
	return env, msgs
}

var benchTime = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// composeData writes msg into a pooled buffer as the content of DATA, as
// the mailer wrote it before it composed letters itself (go-mail's
// Msg.WriteTo, dot-stuffed by dataBuffer); the caller returns it with
// putDataBuffer.
func composeData(msg *gomail.Msg) (*dataBuffer, error) {
	d := getDataBuffer()
	if _, err := msg.WriteTo(d); err != nil {
		putDataBuffer(d)
		return nil, err
	}
	d.end()
	return d, nil
}

// BenchmarkEncoding answers which transfer encoding the parts should go
// in. For each, over the example's rendered digests (text + HTML):
//
//   - client: what the mailer does for one message before the network
//     (build, compose, dot-stuff: composeData); wire-B/msg is the content
//     of DATA as sent, final dot included;
//   - server: what a server does to read that content (net/textproto's
//     DotReader, the same work as go-smtp's DATA reader: the null server
//     of the bench), before any decoding of the parts;
//   - decode: what a reader of the parts then does to get the text back
//     (a server that scans content, the recipient's client).
func BenchmarkEncoding(b *testing.B) {
	env, msgs := sampleMessages(b)
	for _, enc := range []gomail.Encoding{gomail.EncodingQP, gomail.EncodingB64, gomail.NoEncoding} {
		compose := func(m *digest.Message) *dataBuffer {
			msg, err := env.GoMailMsg(m, benchTime)
			if err != nil {
				b.Fatal(err)
			}
			for _, p := range msg.GetParts() {
				p.SetEncoding(enc)
			}
			d, err := composeData(msg)
			if err != nil {
				b.Fatal(err)
			}
			return d
		}
		b.Run(string(enc)+"/client", func(b *testing.B) {
			b.ReportAllocs()
			total, n := 0, 0
			for b.Loop() {
				d := compose(msgs[n%len(msgs)])
				total += len(d.b)
				putDataBuffer(d)
				n++
			}
			b.ReportMetric(float64(total)/float64(n), "wire-B/msg")
		})
		var wire [][]byte
		for _, m := range msgs {
			d := compose(m)
			wire = append(wire, bytes.Clone(d.b))
			putDataBuffer(d)
		}
		b.Run(string(enc)+"/server", func(b *testing.B) {
			b.ReportAllocs()
			var br bytes.Reader
			r := bufio.NewReader(&br)
			n := 0
			for b.Loop() {
				br.Reset(wire[n%len(wire)])
				r.Reset(&br)
				if _, err := io.Copy(io.Discard, textproto.NewReader(r).DotReader()); err != nil {
					b.Fatal(err)
				}
				n++
			}
		})
		b.Run(string(enc)+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				br := bufio.NewReader(textproto.NewReader(bufio.NewReader(bytes.NewReader(wire[n%len(wire)]))).DotReader())
				m, err := mail.ReadMessage(br)
				if err != nil {
					b.Fatal(err)
				}
				if err := decodeParts(m); err != nil {
					b.Fatal(err)
				}
				n++
			}
		})
	}
}

// decodeParts reads every part of a multipart/alternative message (or
// the one body) through its Content-Transfer-Encoding.
func decodeParts(m *mail.Message) error {
	mt, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil {
		return err
	}
	if !strings.HasPrefix(mt, "multipart/") {
		_, err := io.Copy(io.Discard, decoded(m.Header.Get("Content-Transfer-Encoding"), m.Body))
		return err
	}
	mr := multipart.NewReader(m.Body, params["boundary"])
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, decoded(p.Header.Get("Content-Transfer-Encoding"), p)); err != nil {
			return err
		}
	}
}

func decoded(cte string, r io.Reader) io.Reader {
	switch strings.ToLower(cte) {
	case "quoted-printable":
		return quotedprintable.NewReader(r)
	case "base64":
		return base64.NewDecoder(base64.StdEncoding, r)
	}
	return r
}

// BenchmarkData compares, for one message of the example's digests, the
// content of DATA written as go-mail's DataCloser wrote it (Msg.WriteTo
// through net/textproto's dotWriter, a byte at a time) with composeData
// (into a pooled buffer, dot-stuffed a line at a time, one write); and,
// to tell what composition itself costs, build alone and build plus
// Msg.WriteTo into a buffer with no dot-stuffing; and the letter the
// mailer sends, composed without go-mail (composeLetter).
func BenchmarkData(b *testing.B) {
	env, msgs := sampleMessages(b)
	build := func(n int) *gomail.Msg {
		msg, err := env.GoMailMsg(msgs[n%len(msgs)], benchTime)
		if err != nil {
			b.Fatal(err)
		}
		return msg
	}
	b.Run("build", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			build(n)
			n++
		}
	})
	b.Run("build+WriteTo", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		n := 0
		for b.Loop() {
			buf.Reset()
			if _, err := build(n).WriteTo(&buf); err != nil {
				b.Fatal(err)
			}
			n++
		}
	})
	b.Run("build+dotWriter", func(b *testing.B) {
		b.ReportAllocs()
		bw := bufio.NewWriter(io.Discard)
		n := 0
		for b.Loop() {
			w := textproto.NewWriter(bw).DotWriter()
			if _, err := build(n).WriteTo(w); err != nil {
				b.Fatal(err)
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			n++
		}
	})
	b.Run("letter+composeLetter", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			l, err := env.Letter(msgs[n%len(msgs)], benchTime)
			if err != nil {
				b.Fatal(err)
			}
			d, err := composeLetter(l, true, false)
			if err != nil {
				b.Fatal(err)
			}
			putDataBuffer(d)
			l.Release()
			n++
		}
	})
	b.Run("build+composeData", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			d, err := composeData(build(n))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Discard.Write(d.b); err != nil {
				b.Fatal(err)
			}
			putDataBuffer(d)
			n++
		}
	})
}

// SampleDigests builds the digests of examples/snapshot.jsonl for
// 2026-W48 (its unsuppressed customers), for benchmarks.
func SampleDigests(tb testing.TB) []digest.Digest {
	tb.Helper()
	src, err := snapshot.OpenFile(filepath.Join("..", "..", "examples", "snapshot.jsonl"))
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
