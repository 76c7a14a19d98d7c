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
	"slices"
	"strings"

	"github.com/weeklydigest/digest/internal/bench"
)

const userHelp = `Usage: digest-bench user --database-url URL [--digest-bin PATH] [--customers N] [--concurrency C] [--runs R] [--sinks LIST] [--rtt DURATION] [--mailer smtp] [--schema NAME] [--trace DIR] [--json]

Measures the digest binary as the user runs it. Seeds N customers with
"digest seed" into a fresh schema of the PostgreSQL database named by
--database-url (or DIGEST_DATABASE_URL), starts a null SMTP server process
per sink ("digest-bench null-smtp": it discards every message and counts
them; the first keeps the median-sized of the first 201): "chunking"
offers PIPELINING and CHUNKING, "no-chunking" PIPELINING alone. Then, R
rounds, against each sink in turn:

  digest run    the real binary, ledger emptied before each run,
                DIGEST_CONCURRENCY=C, its database connections named
                application_name=digest-bench-run-<id>-<n>
  limit loop    "digest-bench limit-loop", a process of its own: a minimal
                client sending that digest's bytes (a real one the run
                sent, as long as its typical one) with PIPELINING and BDAT,
                one round trip per message (without CHUNKING: pipelined
                MAIL, RCPT, DATA, then the content, two), as many messages
                as the run sent, over C connections: what the sink can
                take at all
  plain loop    "digest-bench plain-loop", a process of its own: go-mail
                sending that digest (same text, HTML and headers, a fresh
                Message-ID and Date), as many messages, over C connections

It prints each run and, per sink, the medians and the job's ratio to the
limit and to the plain loop: messages/s, CPU per message of the sending
process, the SMTP server process and the run's PostgreSQL backends (from
/proc/PID/stat: the server must run on this machine), the ledger tables'
bytes and the WAL written per digest (cluster-wide: other clients' writes
count too), the sending process's peak RSS (ru_maxrss), the CPU busy cores
(the three processes' CPU time over the wall time) and the 1-minute load
average at the end of each run. For each job run it then prints where each
pipeline stage spent the run (the summary's stages: busy, waiting for
input, blocked on output); --trace DIR keeps a Go execution trace of each.

With --rtt DURATION the sinks are that far away: each is reached through
a TCP proxy in this process that delays every byte by RTT/2 in each
direction (a delay line per direction: bytes keep their order and
throughput is not capped; the TCP handshake itself is not delayed). The
job and both loops go through it. The report then gives, per sink, the
bound at that distance, C / (round trips per message × RTT): one round
trip per message with CHUNKING (C/RTT), two without; and the fraction of
it the job reached. --mailer names how the job sends: smtp
(DIGEST_SMTP_URL to the sink) is the only mailer so far.

Without --digest-bin it builds ./cmd/digest with "go build" (run it from
the repository). Never point it at a production database.

Examples:
  digest-bench user --database-url postgres://postgres@127.0.0.1:5432/test?sslmode=disable
  digest-bench user --customers 100000 --schema bench_100k --json
  digest-bench user --customers 2000 --concurrency 16 --rtt 50ms --sinks chunking
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
	runs := fs.Int("runs", 3, "rounds of job, limit and plain-loop runs, interleaved on each sink; the report gives their medians")
	sinks := fs.String("sinks", "chunking,no-chunking", "the null SMTP servers to measure against, in turn: chunking (PIPELINING and CHUNKING), no-chunking (PIPELINING alone)")
	schema := fs.String("schema", "", "keep and reuse this schema (default: a fresh one, dropped at the end)")
	asJSON := fs.Bool("json", false, "print the result as JSON instead of a table")
	traceDir := fs.String("trace", "", "write a Go execution trace of each job run to DIR/run-N.trace (digest run --trace), for \"go tool trace\"")
	rtt := fs.Duration("rtt", 0, "put the sinks this round trip away: a delay proxy in front of each delays every byte by RTT/2 each way (0: none)")
	mailer := fs.String("mailer", bench.MailerSMTP, "how the job sends: "+strings.Join(bench.Mailers, ", ")+" (the only one so far)")
	if err := parseFlags(fs, args, userHelp, stdout); err != nil {
		return err
	}
	if *url == "" {
		return usageError("no database: set --database-url or DIGEST_DATABASE_URL (a PostgreSQL database where a schema may be created and dropped)")
	}
	if !slices.Contains(bench.Mailers, *mailer) {
		return usageError(fmt.Sprintf("--mailer %q: want %s (the only mailer measured so far)", *mailer, strings.Join(bench.Mailers, ", ")))
	}
	if *rtt < 0 {
		return usageError(fmt.Sprintf("--rtt %s: want 0 (no delay) or a positive duration such as 50ms", *rtt))
	}
	var sinkList []bench.Sink
	for _, k := range strings.Split(*sinks, ",") {
		switch k := bench.Sink(strings.TrimSpace(k)); k {
		case bench.SinkChunking, bench.SinkNoChunking:
			sinkList = append(sinkList, k)
		default:
			return usageError(fmt.Sprintf("--sinks: %q: want chunking or no-chunking", k))
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	digestBin, cleanup, err := digestBinary(ctx, *bin, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	res, err := bench.MeasureUser(ctx, bench.UserConfig{
		DatabaseURL: *url, Schema: *schema, DigestBin: digestBin, Self: self,
		Customers: *n, Concurrency: *conc, Runs: *runs, Sinks: sinkList, Progress: stderr, TraceDir: *traceDir,
		Mailer: *mailer, RTT: *rtt,
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

// digestBinary returns bin, or without it a digest binary built from
// ./cmd/digest into a temporary directory that cleanup removes.
func digestBinary(ctx context.Context, bin string, stderr io.Writer) (_ string, cleanup func(), _ error) {
	if bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", nil, usageError(fmt.Sprintf("--digest-bin: %v", err))
		}
		return bin, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "digest-bench-bin-")
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, "digest")
	fmt.Fprintf(stderr, "bench: go build -o %s ./cmd/digest\n", bin)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/digest")
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, usageError(fmt.Sprintf("cannot build ./cmd/digest here (%v: %s); run from the repository or pass --digest-bin", err, strings.TrimSpace(string(out))))
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// nullSMTP runs "digest-bench null-smtp", the server process of "user".
func nullSMTP(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("digest-bench null-smtp", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	keep := fs.String("keep", "", "write the median-sized of the first 201 messages received to this file")
	noChunking := fs.Bool("no-chunking", false, "do not offer CHUNKING (BDAT): clients send the DATA way")
	const help = `Usage: digest-bench null-smtp [--addr HOST:PORT] [--keep FILE] [--no-chunking]

An SMTP server that accepts and discards every message (the server process
of "digest-bench user"). It prints "listening ADDR", answers each "count"
line on stdin with "count N" (messages received so far) and exits at the
end of stdin.
`
	if err := parseFlags(fs, args, help, stdout); err != nil {
		return err
	}
	return bench.ServeNullSMTP(*addr, *keep, !*noChunking, os.Stdin, stdout)
}

// loopHelp is the help of each sender loop of "user".
var loopHelp = map[string]string{
	"plain-loop": `Usage: digest-bench plain-loop --addr HOST:PORT --eml FILE [--messages N] [--concurrency C]

Sends the message in FILE N times over C connections with go-mail, a fresh
Message-ID and Date each time, no TLS: the plain loop of "digest-bench
user", the cost of sending with a common client and nothing else.
`,
	"limit-loop": `Usage: digest-bench limit-loop --addr HOST:PORT --eml FILE [--messages N] [--concurrency C]

Sends the bytes in FILE N times over C connections with a minimal client,
no TLS: with CHUNKING, MAIL, RCPT and BDAT LAST with the message in one
write, one round trip per message; without, MAIL, RCPT and DATA pipelined,
then the message dot-stuffed, two. Each write is prepared once per
connection. The limit loop of "digest-bench user": what the server can
take at all over C connections.
`,
}

// senderLoop runs "digest-bench plain-loop" or "digest-bench limit-loop",
// the references of "user".
func senderLoop(ctx context.Context, name string, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("digest-bench "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	addr := fs.String("addr", "", "the SMTP server, HOST:PORT (required)")
	eml := fs.String("eml", "", "the message to send, RFC 5322 (required)")
	n := fs.Int("messages", 1000, "messages to send")
	conc := fs.Int("concurrency", 4, "SMTP connections")
	if err := parseFlags(fs, args, loopHelp[name], stdout); err != nil {
		return err
	}
	if *addr == "" || *eml == "" || *n < 1 || *conc < 1 {
		return usageError(name + " needs --addr, --eml, --messages >= 1 and --concurrency >= 1")
	}
	send := bench.PlainLoopEML
	if name == "limit-loop" {
		send = bench.LimitLoopEML
	}
	sent, err := send(ctx, *addr, *eml, *n, *conc)
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
