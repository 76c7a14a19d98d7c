package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/weeklydigest/digest/internal/bench"
)

const userHelp = `Usage: digest-bench user --database-url URL [--digest-bin PATH] [--customers N] [--concurrency C] [--runs R] [--schema NAME] [--trace DIR] [--json]

Measures the digest binary as the user runs it. Seeds N customers with
"digest seed" into a fresh schema of the PostgreSQL database named by
--database-url (or DIGEST_DATABASE_URL), starts a null SMTP server in a
process of its own ("digest-bench null-smtp": it discards every message,
counts them and keeps the median-sized of the first 201), then alternates
R times:

  digest run    the real binary, ledger emptied before each run,
                DIGEST_CONCURRENCY=C, its database connections named
                application_name=digest-bench-run-<id>-<n>
  plain loop    "digest-bench plain-loop", a process of its own: go-mail
                sending that digest (a real one the run sent, as long as
                its typical one: same text, HTML and headers), as many
                messages as the run sent,
                over C connections to the same server process

It prints each run and the medians: messages/s, the ratio of the medians,
CPU per message of the sending process, the SMTP server process and the
run's PostgreSQL backends (from /proc/PID/stat: the server must run on this
machine), the ledger tables' bytes and the WAL written per digest
(cluster-wide: other clients' writes count too), the sending process's
peak RSS (ru_maxrss), the CPU busy cores (the three processes' CPU time
over the wall time) and the 1-minute load
average at the end of each run. For each job run it then prints where each
pipeline stage spent the run (the summary's stages: busy, waiting for
input, blocked on output); --trace DIR keeps a Go execution trace of each.

Without --digest-bin it builds ./cmd/digest with "go build" (run it from
the repository). Never point it at a production database.

Examples:
  digest-bench user --database-url postgres://postgres@127.0.0.1:5432/test?sslmode=disable
  digest-bench user --customers 100000 --schema bench_100k --json
`

// user runs "digest-bench user".
func user(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("digest-bench user", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	url := fs.String("database-url", getenv("DIGEST_DATABASE_URL"), "PostgreSQL URL of the database to work in (a schema of its own) [$DIGEST_DATABASE_URL]; required")
	bin := fs.String("digest-bin", "", "the digest binary to measure (default: go build ./cmd/digest into a temporary directory)")
	n := fs.Int("customers", 20_000, "customers to seed")
	conc := fs.Int("concurrency", 4, "SMTP connections of the run (DIGEST_CONCURRENCY) and of the plain loop")
	runs := fs.Int("runs", 3, "job runs and plain-loop runs, interleaved; the report gives their medians")
	schema := fs.String("schema", "", "keep and reuse this schema (default: a fresh one, dropped at the end)")
	asJSON := fs.Bool("json", false, "print the result as JSON instead of a table")
	traceDir := fs.String("trace", "", "write a Go execution trace of each job run to DIR/run-N.trace (digest run --trace), for \"go tool trace\"")
	if err := parseFlags(fs, args, userHelp, stdout); err != nil {
		return err
	}
	if *url == "" {
		return usageError("no database: set --database-url or DIGEST_DATABASE_URL (a PostgreSQL database where a schema may be created and dropped)")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if *bin == "" {
		dir, err := os.MkdirTemp("", "digest-bench-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*bin = filepath.Join(dir, "digest")
		fmt.Fprintf(stderr, "bench: go build -o %s ./cmd/digest\n", *bin)
		build := exec.CommandContext(ctx, "go", "build", "-o", *bin, "./cmd/digest")
		if out, err := build.CombinedOutput(); err != nil {
			return usageError(fmt.Sprintf("cannot build ./cmd/digest here (%v: %s); run from the repository or pass --digest-bin", err, strings.TrimSpace(string(out))))
		}
	} else if _, err := os.Stat(*bin); err != nil {
		return usageError(fmt.Sprintf("--digest-bin: %v", err))
	}
	res, err := bench.MeasureUser(ctx, bench.UserConfig{
		DatabaseURL: *url, Schema: *schema, DigestBin: *bin, Self: self,
		Customers: *n, Concurrency: *conc, Runs: *runs, Progress: stderr, TraceDir: *traceDir,
	})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return res.Print(stdout)
}

// nullSMTP runs "digest-bench null-smtp", the server process of "user".
func nullSMTP(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("digest-bench null-smtp", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	keep := fs.String("keep", "", "write the median-sized of the first 201 messages received to this file")
	const help = `Usage: digest-bench null-smtp [--addr HOST:PORT] [--keep FILE]

An SMTP server that accepts and discards every message (the server process
of "digest-bench user"). It prints "listening ADDR", answers each "count"
line on stdin with "count N" (messages received so far) and exits at the
end of stdin.
`
	if err := parseFlags(fs, args, help, stdout); err != nil {
		return err
	}
	return bench.ServeNullSMTP(*addr, *keep, os.Stdin, stdout)
}

// plainLoop runs "digest-bench plain-loop", the plain sender of "user".
func plainLoop(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("digest-bench plain-loop", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	addr := fs.String("addr", "", "the SMTP server, HOST:PORT (required)")
	eml := fs.String("eml", "", "the message to send, RFC 5322 (required)")
	n := fs.Int("messages", 1000, "messages to send")
	conc := fs.Int("concurrency", 4, "SMTP connections")
	const help = `Usage: digest-bench plain-loop --addr HOST:PORT --eml FILE [--messages N] [--concurrency C]

Sends the message in FILE N times over C connections with go-mail, a fresh
Message-ID and Date each time, no TLS: the plain loop of "digest-bench
user", the cost of sending and nothing else.
`
	if err := parseFlags(fs, args, help, stdout); err != nil {
		return err
	}
	if *addr == "" || *eml == "" || *n < 1 || *conc < 1 {
		return usageError("plain-loop needs --addr, --eml, --messages >= 1 and --concurrency >= 1")
	}
	sent, err := bench.PlainLoopEML(ctx, *addr, *eml, *n, *conc)
	fmt.Fprintf(stdout, "sent %d\n", sent)
	return err
}

// parseFlags parses args; --help prints help and the flags.
func parseFlags(fs *flag.FlagSet, args []string, help string, stdout io.Writer) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, "%s\nFlags:\n", strings.TrimRight(help, "\n"))
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return err
		}
		return usageError(err.Error())
	}
	if fs.NArg() > 0 {
		return usageError(fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	return nil
}
