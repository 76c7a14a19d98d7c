package main

import (
	"context"
	"os"

	"github.com/weeklydigest/digest/internal/bench"
	"github.com/weeklydigest/digest/internal/pgtest"
)

const benchHelp = `Usage: digest bench [--customers N] [--concurrency C] [--batch-size B] [--schema NAME]

Measures a whole week end to end on this machine: seeds N synthetic
customers with COPY into a fresh schema of DIGEST_DATABASE_URL (default: the
local test server), starts a null SMTP server in this process, runs the
week through the real run loop, PostgreSQL ledger and SMTP mailer (no TLS,
rate limit far above what is reachable), and measures a plain go-mail send
loop to the same server over the same number of connections. It prints
digests/s, the plain loop's msg/s and their ratio, ledger round trips per
digest, claim latency, peak RSS (VmHWM of the run) and Go heap in use, and
the ledger's bytes and WAL per digest.

Never point it at a production database: it creates and drops a schema.
With --schema the schema is kept and its customers reused by the next
bench of the same N (seeding a million takes minutes); its ledger tables
are emptied first.

Examples:
  digest bench                                   # 20,000 customers, 4 connections
  digest bench --customers 1000000 --schema bench_1m
`

func cmdBench(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "bench", benchHelp)
	st := registerOnly(fs, env, "DIGEST_DATABASE_URL", "DIGEST_LOG_LEVEL")
	n := fs.Int("customers", 20_000, "customers to seed and send to")
	conc := fs.Int("concurrency", 4, "SMTP connections and parallel sends (run and plain loop alike)")
	batch := fs.Int("batch-size", 100, "keys per ledger round trip")
	plain := fs.Int("plain-messages", 0, "messages for the plain go-mail loop (default: min(customers, 20000))")
	cpuprofile := fs.String("cpuprofile", "", "write a pprof CPU profile of the run phase to this file")
	schema := fs.String("schema", "", "keep and reuse this schema (default: a fresh one, dropped at the end)")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	url := st.str("DIGEST_DATABASE_URL")
	if url == "" {
		url = pgtest.BaseURL()
	}
	cfg := bench.Config{
		DatabaseURL: url, Schema: *schema, Customers: *n, Concurrency: *conc, BatchSize: *batch,
		PlainMessages: *plain, Progress: env.Stderr, Logger: newLogger(env, st),
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return usagef("--cpuprofile: %v", err)
		}
		defer f.Close()
		cfg.CPUProfile = f
	}
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	return res.Print(env.Stdout)
}
