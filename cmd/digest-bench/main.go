// Command digest-bench measures a whole week end to end on this machine:
// the real run loop, PostgreSQL ledger and SMTP mailer against a null SMTP
// server in the same process. It is a command of its own so that the
// production binary links neither the SMTP server library nor the test
// harness (cmd/digest's deps_test.go checks). Run "digest-bench --help".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/weeklydigest/digest/internal/bench"
)

const help = `Usage: digest-bench --database-url URL [--customers N] [--concurrency C] [--batch-size B] [--schema NAME]
       digest-bench user --database-url URL [--digest-bin PATH] [--runs R] [--json] ...
       digest-bench capacity --database-url URL [--customers N] [--shards S] [--json] ...

"digest-bench user" measures the digest binary as the user runs it: a
separate null SMTP server process, a plain go-mail loop process sending the
same rendered digest, CPU per message of each process and of the run's
PostgreSQL backends; see "digest-bench user --help". It is the measurement
of record: the in-process mode below flatters the job (one process, a
shorter plain-loop message).

"digest-bench capacity" measures a large week as the sharded Job sends it:
S shard processes at once on one PostgreSQL against a null SMTP server
process, then "digest status" and "digest prune" of the week; see
"digest-bench capacity --help".

Without a subcommand it measures a whole week end to end on this machine: seeds N synthetic
customers with COPY into a fresh schema of the PostgreSQL database named by
--database-url (or DIGEST_DATABASE_URL; one of them is required), starts a
null SMTP server in this process, runs the week through the real run loop,
PostgreSQL ledger and SMTP mailer (no TLS, rate limit far above what is
reachable), and measures a plain go-mail send loop to the same server over
the same number of connections. It prints digests/s, the plain loop's msg/s
and their ratio, ledger round trips per digest, claim latency, peak RSS
(VmHWM of the run) and Go heap in use, and the ledger's bytes and WAL per
digest.

Never point it at a production database: it creates and drops a schema.
With --schema the schema is kept and its customers reused by the next
bench of the same N (seeding a million takes minutes); its ledger tables
are emptied first.

Examples:
  digest-bench --database-url postgres://postgres@127.0.0.1:5432/test?sslmode=disable
  DIGEST_DATABASE_URL=postgres://... digest-bench --customers 1000000 --schema bench_1m
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Main runs the command line args (without the program name) and returns
// the exit code: 0 done, 1 the benchmark failed, 2 a usage error.
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	err := run(ctx, args, getenv, stdout, stderr)
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "digest-bench: %s (see \"digest-bench --help\")\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "digest-bench: %v\n", err)
		return 1
	}
}

// usageError is a mistake on the command line: exit 2.
type usageError string

func (e usageError) Error() string { return string(e) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "user":
			return user(ctx, args[1:], getenv, stdout, stderr)
		case "capacity":
			return capacity(ctx, args[1:], getenv, stdout, stderr)
		case "null-smtp":
			return nullSMTP(args[1:], stdout)
		case "plain-loop", "limit-loop":
			return senderLoop(ctx, args[0], args[1:], stdout)
		}
	}
	fs := flag.NewFlagSet("digest-bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	url := fs.String("database-url", getenv("DIGEST_DATABASE_URL"), "PostgreSQL URL of the database to work in (a schema of its own) [$DIGEST_DATABASE_URL]; required")
	logLevel := fs.String("log-level", or(getenv("DIGEST_LOG_LEVEL"), "info"), "debug, info, warn or error [$DIGEST_LOG_LEVEL]")
	n := fs.Int("customers", 20_000, "customers to seed and send to")
	conc := fs.Int("concurrency", 4, "SMTP connections and parallel sends (run and plain loop alike)")
	batch := fs.Int("batch-size", 100, "keys per ledger round trip")
	plain := fs.Int("plain-messages", 0, "messages for the plain go-mail loop (default: min(customers, 20000))")
	cpuprofile := fs.String("cpuprofile", "", "write a pprof CPU profile of the run phase to this file")
	schema := fs.String("schema", "", "keep and reuse this schema (default: a fresh one, dropped at the end)")
	if err := parseFlags(fs, args, help, stdout); err != nil {
		return err
	}
	if *url == "" {
		// No default: a silent fall-back to some database is how a
		// benchmark ends up creating schemas where it should not.
		return usageError("no database: set --database-url or DIGEST_DATABASE_URL (a PostgreSQL database where a schema may be created and dropped)")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(*logLevel))); err != nil {
		return usageError(fmt.Sprintf("--log-level %q: want debug, info, warn or error", *logLevel))
	}
	cfg := bench.Config{
		DatabaseURL: *url, Schema: *schema, Customers: *n, Concurrency: *conc, BatchSize: *batch,
		PlainMessages: *plain, Progress: stderr,
		Logger: slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})),
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return usageError(fmt.Sprintf("--cpuprofile: %v", err))
		}
		defer f.Close()
		cfg.CPUProfile = f
	}
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	return res.Print(stdout)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
