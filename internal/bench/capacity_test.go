package bench

import (
	"strings"
	"testing"
)

// The Markdown table names every measure, totals the shards and keeps
// Markdown's shape: every row of a table has its header's columns.
func TestCapacityTable(t *testing.T) {
	t.Parallel()
	res := CapacityResult{Customers: 10_000_000, Shards: 2, Concurrency: 4, Week: "2026-W48", SeedSeconds: 120,
		Runs: []ShardRun{
			{Shard: "0/2", Sent: 4_500_000, Seconds: 1000, ProcessCPU: 120, PostgresCPU: 140, Backends: 4, PeakRSS: 50},
			{Shard: "1/2", Sent: 4_500_001, Seconds: 1010, ProcessCPU: 130, PostgresCPU: 150, Backends: 5, PeakRSS: 60,
				Warnings: []string{"record the run's expectation for status (status will read the source): timeout"}},
		},
		Seconds: 1010, Sent: 9_000_001, Received: 9_000_001, Receipts: map[string]int64{"sent": 9_000_001, "failed": 2, "held": 2},
		ProcessCPU: 125, PostgresCPU: 145, ServerCPU: 40, Cores: 1.9, WALBytes: 1845.6, LoadBefore: 3, LoadAfter: 9.5,
		Tables:      []Table{{Name: "receipts_2026_w48", Rows: 9_000_001, Bytes: 10 << 30}},
		Status:      Timed{Seconds: 0.03, Outcome: "complete", CountedFrom: "ledger", PeakRSS: 20},
		StatusShard: Timed{Seconds: 80, Outcome: "remaining", ExitCode: 3, CountedFrom: "source", SourceReason: "the week was pruned", PeakRSS: 1400},
		AgeSeconds:  95, Prune: Timed{Seconds: 12.5, Outcome: "pruned 9000001 receipts older than 90d, the partition dropped whole", PeakRSS: 30},
	}
	var b strings.Builder
	if err := res.Print(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Capacity: 10,000,000 customers, 2 shards × 4 connections, week 2026-W48",
		"| 0/2 | 4,500,000 | 1000.0 s | 4,500 | 120 µs | 140 µs | 4 | 50 MiB |",
		"| **all** | **9,000,001** | **1010.0 s** | **8,911** | **125 µs** | **145 µs** | 9 | 60 MiB (max) |",
		"| seeding (`digest seed`, COPY) | 120.0 s, 83,333 customers/s |",
		"| null SMTP server received | 9,000,001 (the shards sent 9,000,001) |",
		"| receipts of the week | sent 9,000,001, failed 2, held 2 |",
		"| CPU/digest, all processes | 310 µs |",
		"| busy cores | 1.90 (1-minute load 3.00 before the run, 9.50 after) |",
		"| WAL/digest | 1,846 bytes (cluster-wide) |",
		"| status, whole week | 0.03 s, 20 MiB peak RSS: complete (exit 0), counted from ledger |",
		"| status, one shard | 80.00 s, 1400 MiB peak RSS: remaining (exit 3), counted from source: the week was pruned |",
		"| ageing the week by SQL (not part of prune) | 95.0 s |",
		"| prune of the week | 12.50 s, 30 MiB peak RSS: pruned 9000001 receipts older than 90d, the partition dropped whole (exit 0) |",
		"| receipts_2026_w48 | 9,000,001 | 10240.0 MiB | 1,193 |",
		"Shard 1/2 logged: record the run's expectation for status (status will read the source): timeout",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("table lacks the line %q:\n%s", want, out)
		}
	}
	for _, table := range strings.Split(strings.TrimSpace(out), "\n\n")[1:] {
		lines := strings.Split(table, "\n")
		cols := strings.Count(lines[0], "|")
		for _, l := range lines {
			if strings.Count(l, "|") != cols {
				t.Errorf("row %q has %d bars, its header %d", l, strings.Count(l, "|"), cols)
			}
		}
	}
}

func TestGrouped(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 10_000_000: "10,000,000", -1234567: "-1,234,567"} {
		if got := grouped(n); got != want {
			t.Errorf("grouped(%d) = %q, want %q", n, got, want)
		}
	}
}

// Validate fills in the defaults and refuses what cannot be run.
func TestCapacityConfigValidate(t *testing.T) {
	t.Parallel()
	ok := CapacityConfig{DatabaseURL: "postgres://x", DigestBin: "digest", Self: "digest-bench"}
	c := ok
	if err := c.Validate(); err != nil || c.Customers != 100_000 || c.Shards != 8 || c.Concurrency != 4 || c.Week != DefaultWeek {
		t.Errorf("defaults: %+v, %v; want 100,000 customers, 8 shards, 4 connections, DefaultWeek", c, err)
	}
	for name, mutate := range map[string]func(*CapacityConfig){
		"no database":  func(c *CapacityConfig) { c.DatabaseURL = "" },
		"no binary":    func(c *CapacityConfig) { c.DigestBin = "" },
		"no self":      func(c *CapacityConfig) { c.Self = "" },
		"65 shards":    func(c *CapacityConfig) { c.Shards = 65 },
		"neg shards":   func(c *CapacityConfig) { c.Shards = -1 },
		"conc 257":     func(c *CapacityConfig) { c.Concurrency = 257 },
		"neg customer": func(c *CapacityConfig) { c.Customers = -5 },
		"bad schema":   func(c *CapacityConfig) { c.Schema = "a;drop" },
	} {
		c := ok
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted %+v", name, c)
		}
	}
}

// A run's warnings and errors are kept, first ones first, with the
// summary of its last line; other lines only in the tail.
func TestScanSummaryKeepsWarnings(t *testing.T) {
	t.Parallel()
	var log strings.Builder
	log.WriteString(`{"level":"INFO","msg":"started"}` + "\n")
	for i := range maxWarnings + 2 {
		log.WriteString(`{"level":"WARN","msg":"slow","err":"timeout ` + string(rune('a'+i)) + `"}` + "\n")
	}
	log.WriteString(`{"level":"ERROR","msg":"late"}` + "\n" + `{"level":"INFO","msg":"done","summary":{"sent":3}}` + "\n")
	sum, tail, warnings := scanSummary(strings.NewReader(log.String()))
	if sum["sent"] != 3.0 || !strings.HasSuffix(tail, `"sent":3}}`) {
		t.Errorf("summary %v, tail %q; want sent 3 and the last line", sum, tail)
	}
	if len(warnings) != maxWarnings || warnings[0] != "slow: timeout a" || warnings[maxWarnings-1] != "slow: timeout e" {
		t.Errorf("warnings %q; want the first %d", warnings, maxWarnings)
	}
}
