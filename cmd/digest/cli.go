package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Exit codes. They are part of the interface: a CronJob's alerting and an
// operator's script read them.
const (
	ExitOK         = 0 // everything of the run is sent or settled
	ExitFailure    = 1 // any other failure (ledger or source unreachable, bad rows in strict mode)
	ExitUsage      = 2 // usage or configuration error; nothing was done
	ExitIncomplete = 3 // retryable or unsent rows remain (deadline reached, SIGTERM)
	ExitReview     = 4 // rows need review: held or quarantined in this run
)

// Env is the process environment a command sees. Tests build their own.
type Env struct {
	Getenv func(string) string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// usageError is a mistake in the command line or configuration: exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// exitError carries a specific exit code with its message (if any).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *Env, args []string) error
}

func commands() []command {
	return []command{
		{"run", "send (or dry-run) one week's digests: the CronJob's command", cmdRun},
		{"migrate", "create or upgrade the ledger schema", cmdMigrate},
		{"status", "receipts of a week by state, oldest pending ages", cmdStatus},
		{"review", "list, show, release or mark sent held and quarantined receipts", cmdReview},
		{"prune", "delete receipts older than the replay horizon", cmdPrune},
		{"schedule", "run weekly on a cron schedule (instead of a CronJob)", cmdSchedule},
		{"preview", "render one customer's digest of a week; sends nothing", cmdPreview},
		{"send-test", "send a sample of a week's digests to an internal address, marked as tests", cmdSendTest},
		{"seed", "fill demo source tables, or write a demo snapshot file", cmdSeed},
		{"week", "print the ISO week of a date and its bounds", cmdWeek},
		{"key", "print the ledger key of one customer's digest", cmdKey},
		{"unsubscribe-token", "make or --verify a one-click unsubscribe token", cmdUnsubscribeToken},
		{"bench", "measure a seeded week end to end against a null SMTP server", cmdBench},
		{"version", "print the version", cmdVersion},
	}
}

const mainHelp = `digest sends every customer one weekly account-activity digest by email,
and never the same digest twice: a receipt ledger (PostgreSQL, or an embedded
SQLite file) decides, per customer|week|type|version, whether a digest may be
sent, however often the job is retried, replayed, crashed or run in parallel.

Usage:
  digest <command> [flags] [args]

Commands:
%s
Run "digest <command> --help" for a command's flags and examples.

Quick start (embedded default: SQLite ledger ./digest.db, file outbox ./outbox):
  digest run --snapshot examples/snapshot.jsonl --week 2026-W48
  digest run --snapshot examples/snapshot.jsonl --week 2026-W48   # again: sends nothing

Production (PostgreSQL ledger and source, SMTP):
  export DIGEST_DATABASE_URL=postgres://digest@db/app DIGEST_HMAC_KEYS_FILE=/secrets/hmac-keys
  export DIGEST_SMTP_URL=smtp://digest@smtp.example.com:587 DIGEST_SMTP_PASSWORD_FILE=/secrets/smtp-password
  digest migrate && digest run            # the week before now, in DIGEST_TZ

Exit codes:
  0  everything of the run is sent or settled
  1  any other failure (ledger or source unreachable, invalid source rows)
  2  usage or configuration error; nothing was done
  3  incomplete: retryable or unsent rows remain (deadline reached, or SIGTERM)
  4  rows need review: held or quarantined in this run ("digest review list")

Environment (each variable has a flag of the same name on the commands that use it):
%s`

func mainUsage(w io.Writer) {
	var cmds strings.Builder
	for _, c := range commands() {
		fmt.Fprintf(&cmds, "  %-17s  %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, mainHelp, cmds.String(), envHelp())
}

// Main runs the command line args (without the program name) and returns
// the exit code.
func Main(ctx context.Context, args []string, env *Env) int {
	if len(args) == 0 {
		mainUsage(env.Stderr)
		return ExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 {
			return Main(ctx, []string{args[1], "--help"}, env)
		}
		mainUsage(env.Stdout)
		return ExitOK
	case "-version", "--version":
		args[0] = "version"
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return exitCode(env, c.name, c.run(ctx, env, args[1:]))
		}
	}
	fmt.Fprintf(env.Stderr, "digest: unknown command %q\n\n", args[0])
	mainUsage(env.Stderr)
	return ExitUsage
}

func exitCode(env *Env, name string, err error) int {
	var ue *usageError
	var ee *exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(env.Stderr, "digest %s: %s\nRun \"digest %s --help\" for usage.\n", name, ue.msg, name)
		return ExitUsage
	case errors.As(err, &ee):
		if ee.err != nil {
			fmt.Fprintf(env.Stderr, "digest %s: %v\n", name, ee.err)
		}
		return ee.code
	default:
		fmt.Fprintf(env.Stderr, "digest %s: %v\n", name, err)
		return ExitFailure
	}
}

// newFlagSet returns a flag set whose --help prints help (the command's own
// text, then its flags) to stdout.
func newFlagSet(env *Env, name, help string) *flag.FlagSet {
	fs := flag.NewFlagSet("digest "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		out := env.Stdout
		fmt.Fprintf(out, "%s\nFlags:\n", strings.TrimRight(help, "\n"))
		fs.SetOutput(out)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// parse parses flags and positional arguments in any order
// ("digest week 2026-12-31 --tz Europe/Berlin" works). It returns the
// positional arguments. Flag errors become usage errors.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err // the flag package has printed fs.Usage
			}
			return nil, usagef("%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func cmdVersion(_ context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "version", "Usage: digest version\n\nPrints the version stamped into the binary at build time.\n")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(env.Stdout, "digest", version)
	return nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
