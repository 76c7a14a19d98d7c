package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
)

const migrateHelp = `Usage: digest migrate [--down-to VERSION]

Creates or upgrades the ledger schema: PostgreSQL at DIGEST_DATABASE_URL, or
the embedded SQLite file DIGEST_LEDGER_PATH. Safe to run twice, and from two
pods at once (a lock and a version table). Run it before deploying a new
version; "digest run" migrates the embedded SQLite ledger by itself.

--down-to VERSION rolls the schema back to VERSION with this binary, before
an image older than one of its migrations is deployed again: on PostgreSQL,
migration 6 partitions receipts by week, which binaries before it cannot
use, so rolling back past it takes "digest migrate --down-to 5" first
(docs/operations.md, "Rolling out, and rolling back"). Rows are kept.

Examples:
  DIGEST_DATABASE_URL=postgres://digest_owner@db/app digest migrate
  digest migrate --ledger-path ./digest.db
  DIGEST_DATABASE_URL=postgres://digest_owner@db/app digest migrate --down-to 5
`

func cmdMigrate(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "migrate", migrateHelp)
	st := register(fs, env, "migrate")
	downTo := fs.Int64("down-to", 0, "roll the schema back to this migration version (1 or more) instead of upgrading it")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	down := false
	fs.Visit(func(f *flag.Flag) { down = down || f.Name == "down-to" })
	if down && *downTo < 1 {
		return usagef("--down-to %d: a version of 1 or more (1 is the first migration, which creates the ledger)", *downTo)
	}
	lc, level := parseMigrate(st)
	log := newLogger(env, level)
	if err := checkDatabaseURL(lc.DatabaseURL); err != nil {
		return err
	}
	store, err := openStore(ctx, lc, log, nil)
	if err != nil {
		return fmt.Errorf("open ledger: %w", err)
	}
	defer store.Close()
	if down {
		if err := store.MigrateDownTo(ctx, *downTo); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		log.Info("ledger schema rolled back", "version", *downTo)
		return nil
	}
	if err := store.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	log.Info("ledger schema is up to date")
	return nil
}

// parseMigrate reads migrate's settings: the ledger and the log level.
func parseMigrate(st *settings) (ledgerConfig, slog.Level) { return st.ledger(), st.logLevel() }
