package main

import (
	"bufio"
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/redact"
	"github.com/weeklydigest/digest/snapshot"
)

const seedHelp = `Usage: digest seed --customers N --week YYYY-Www [--seed S] [--out FILE.jsonl]

Creates deterministic synthetic customers (a unique email each) with
activity in the week, for demos, tests and benchmarks. Without --out it
creates the demo tables digest_customers and digest_activity in
DIGEST_DATABASE_URL if absent, loads them with COPY and ANALYZEs them (the
run's source read is planned on their statistics); with --out it writes a
JSON Lines snapshot instead. The same N, week and seed always give the
same data. Into tables that already hold customers it adds the customers
that are new and the week's activity, so a demo can have several weeks;
seeding a week twice adds nothing. Only activity recorded by now is
written: a week not over yet gets what has happened so far, never a row
recorded in the future. Never point it at a production database.

Examples:
  digest seed --customers 1000 --week 2026-W48 --out /tmp/week48.jsonl
  DIGEST_DATABASE_URL=postgres://postgres@127.0.0.1/test digest seed --customers 20000 --week 2026-W48
  DIGEST_DATABASE_URL=postgres://postgres@127.0.0.1/test digest seed --customers 20000 --week 2026-W49
`

func cmdSeed(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "seed", seedHelp)
	st := register(fs, env, "seed")
	n := fs.Int("customers", 0, "number of customers (required)")
	week := fs.String("week", "", "ISO week of the activity (required)")
	seed := fs.Uint64("seed", 1, "random seed")
	out := fs.String("out", "", "write a JSON Lines snapshot to this file instead of the database")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	if *n < 1 || *n > 100_000_000 {
		return usagef("--customers %d: want 1 to 100000000", *n)
	}
	w, err := digest.ParseISOWeek(*week)
	if err != nil {
		return usagef("--week: %v", err)
	}
	records := snapshot.SyntheticUntil(*n, w, *seed, env.now()) // nothing recorded in the future
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return usagef("--out: %v", err)
		}
		bw := bufio.NewWriterSize(f, 1<<16)
		count, err := snapshot.WriteJSONL(bw, records)
		if err == nil {
			err = bw.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", *out, err)
		}
		fmt.Fprintf(env.Stdout, "wrote %d customers to %s\n", count, *out)
		return nil
	}
	url := parseSeed(st)
	if url == "" {
		return usagef("set DIGEST_DATABASE_URL (or pass --out FILE.jsonl)")
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return usagef("DIGEST_DATABASE_URL: %v", redact.Error(err, url))
	}
	defer pool.Close()
	c, r, err := snapshot.Seed(ctx, pool, records)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "seeded %d customers and %d activity rows for %s\n", c, r, w)
	return nil
}

// parseSeed reads seed's one setting: the PostgreSQL database to fill
// ("": none, a snapshot file only).
func parseSeed(st *settings) string { return st.get("DIGEST_DATABASE_URL") }
