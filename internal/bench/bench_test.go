package bench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/internal/bench"
	"github.com/weeklydigest/digest/internal/pgtest"
)

// TestRunSmall runs the whole benchmark at a small N so that the command
// cannot rot. It checks what the run did and the report's shape, never a
// timing: the machine's speed is not the test's business.
func TestRunSmall(t *testing.T) {
	pgtest.SkipShort(t)
	t.Parallel()
	var progress bytes.Buffer
	res, err := bench.Run(context.Background(), bench.Config{
		DatabaseURL: pgtest.BaseURL(), Customers: 2000, PlainMessages: 400, Concurrency: 2, BatchSize: 50,
		Progress: &progress,
	})
	if err != nil {
		t.Fatalf("bench.Run: %v\n%s", err, progress.String())
	}
	s := res.Summary
	if s.Digests != 2000 || s.Sent == 0 || s.Sent+s.Skipped != s.Digests {
		t.Errorf("summary: %d digests, %d sent, %d skipped; want 2000 read, every one sent or skipped", s.Digests, s.Sent, s.Skipped)
	}
	// The null server saw each digest once, and each plain message once.
	if want := int64(s.Sent + res.PlainSent); res.ServerMsgs != want {
		t.Errorf("null server received %d messages, want %d sent + %d plain", res.ServerMsgs, s.Sent, res.PlainSent)
	}
	if res.PlainSent != 400 {
		t.Errorf("plain loop sent %d, want 400", res.PlainSent)
	}
	if !(res.DigestsPS > 0 && res.PlainPS > 0 && res.Ratio > 0) {
		t.Errorf("rates: %.0f digests/s, %.0f plain msg/s, ratio %.2f; want all positive", res.DigestsPS, res.PlainPS, res.Ratio)
	}
	// Batching, not speed: a ledger call per digest would mean no batches.
	if res.CallsPerDg <= 0 || res.CallsPerDg >= 1 {
		t.Errorf("ledger round trips per digest %.3f: want between 0 and 1", res.CallsPerDg)
	}
	if res.PeakRSS <= 0 || res.HeapInUse == 0 || res.ReceiptBytes <= 0 || res.WALBytes <= 0 {
		t.Errorf("peak RSS %d, heap %d, receipts %d bytes, WAL %d bytes: want all measured", res.PeakRSS, res.HeapInUse, res.ReceiptBytes, res.WALBytes)
	}

	var out bytes.Buffer
	if err := res.Print(&out); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"digests/s", "plain go-mail msg/s", "ratio", "ledger round trips/digest",
		"claim latency p50", "claim latency p99", "peak RSS (VmHWM)", "Go heap in use", "WAL bytes/digest"} {
		if !strings.Contains(out.String(), "\n"+name+" ") {
			t.Errorf("report lacks %q:\n%s", name, out.String())
		}
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for _, cfg := range []bench.Config{
		{}, // no database
		{DatabaseURL: "postgres://x", Customers: -1},     // no customers
		{DatabaseURL: "postgres://x", Concurrency: 1000}, // too many connections
		{DatabaseURL: "postgres://x", Schema: "Bad-Name"},
	} {
		if _, err := bench.Run(context.Background(), cfg); err == nil {
			t.Errorf("Run(%+v): no error", cfg)
		}
	}
}
