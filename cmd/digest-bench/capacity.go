package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/weeklydigest/digest/internal/bench"
)

const capacityHelp = `Usage: digest-bench capacity --database-url URL [--digest-bin PATH] [--customers N] [--shards S] [--concurrency C] [--schema NAME] [--json]

Measures a large week the way the sharded Job sends it: S "digest run
--shard i/S" processes at once (the Kubernetes Indexed Job's shape) on one
PostgreSQL, against one null SMTP server process ("digest-bench
null-smtp", which discards and counts every message). Seeds N customers
with "digest seed" into a fresh schema of the PostgreSQL database named by
--database-url (or DIGEST_DATABASE_URL); with --schema the schema is kept
and its customers reused by the next run of the same N (seeding ten
million takes a while), its ledger emptied first.

It prints, as Markdown, each shard and their total: digests sent, wall
time, digests/s, CPU per digest of the shard process and of its PostgreSQL
backends (from /proc/PID/stat: the server must run on this machine; the
backends are found by application_name=digest-bench-cap-<id>-<i>), their
count and the process's peak RSS (ru_maxrss). Then the week's measures:
what the null server received against what the shards sent, the week's
receipts by state, the null server's CPU per digest, the busy cores (the
processes' CPU time over the wall time) with the 1-minute load average
before and after, the WAL written per digest (cluster-wide), the duration,
peak RSS and verdict of "digest status" of the week and of shard 0/S
(and whether it counted from the ledger or read the source, and why), and of
"digest prune --older-than 90d" once the week's receipts and runs are
aged by 400 days in SQL (a prune never takes a week run within its
horizon; the ageing's own time is shown apart), and the rows and size of
each non-empty receipts partition, receipt_events and the source tables.

A shard that exits non-zero fails the measurement (exit 1) after the
table is printed. Without --digest-bin it builds ./cmd/digest with "go
build" (run it from the repository). Never point it at a production
database.

Examples:
  digest-bench capacity --database-url postgres://postgres@127.0.0.1:5432/test?sslmode=disable --customers 100000
  nice -n 10 digest-bench capacity --customers 10000000 --schema cap_10m --json > cap-10m.json
`

// capacity runs "digest-bench capacity".
func capacity(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("digest-bench capacity", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	url := fs.String("database-url", getenv("DIGEST_DATABASE_URL"), "PostgreSQL URL of the database to work in (a schema of its own) [$DIGEST_DATABASE_URL]; required")
	bin := fs.String("digest-bin", "", "the digest binary to measure (default: go build ./cmd/digest into a temporary directory)")
	n := fs.Int("customers", 100_000, "customers to seed")
	shards := fs.Int("shards", 8, "shard processes run at once (digest run --shard i/S), 1 to 64")
	conc := fs.Int("concurrency", 4, "SMTP connections of each shard (DIGEST_CONCURRENCY), 1 to 256")
	schema := fs.String("schema", "", "keep and reuse this schema (default: a fresh one, dropped at the end)")
	asJSON := fs.Bool("json", false, "print the result as JSON instead of Markdown")
	if err := parseFlags(fs, args, capacityHelp, stdout); err != nil {
		return err
	}
	if *url == "" {
		return usageError("no database: set --database-url or DIGEST_DATABASE_URL (a PostgreSQL database where a schema may be created and dropped)")
	}
	// Zero means "the default" to the config, never on the command line.
	switch {
	case *n < 1:
		return usageError(fmt.Sprintf("--customers %d: want at least 1", *n))
	case *shards < 1:
		return usageError(fmt.Sprintf("--shards %d: want 1 to 64", *shards))
	case *conc < 1:
		return usageError(fmt.Sprintf("--concurrency %d: want 1 to 256", *conc))
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cfg := bench.CapacityConfig{
		// DigestBin stands in until the binary is built: the flags are
		// checked first, so a mistake costs no build.
		DatabaseURL: *url, Schema: *schema, DigestBin: or(*bin, "./cmd/digest"), Self: self,
		Customers: *n, Shards: *shards, Concurrency: *conc, Progress: stderr,
	}
	if err := cfg.Validate(); err != nil {
		return usageError("--" + strings.TrimPrefix(err.Error(), "bench: ")) // "shards 65: ..."
	}
	digestBin, cleanup, err := digestBinary(ctx, *bin, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	cfg.DigestBin = digestBin
	res, err := bench.MeasureCapacity(ctx, cfg)
	if res.Runs == nil { // nothing ran: no table to print
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if perr := enc.Encode(res); perr != nil {
			return perr
		}
	} else if perr := res.Print(stdout); perr != nil {
		return perr
	}
	return err
}
