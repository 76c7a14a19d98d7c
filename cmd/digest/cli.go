package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/redact"
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
	// Now is the clock: the default week, a run's deadline and clock, the
	// time a prune counts back from, a preview's Date. Nil: time.Now.
	// (The cron of "digest schedule" fires on the real clock.)
	Now func() time.Time
}

// now reads the environment's clock.
func (e *Env) now() time.Time {
	if e.Now == nil {
		return time.Now()
	}
	return e.Now()
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
		{"status", "is a week done? expected digests against settled receipts, the last run; exit 0, 3 or 4", cmdStatus},
		{"verify", "ask the provider about every sent receipt of a week: each found once? the rollout gate", cmdVerify},
		{"review", "list, show, release, mark sent or acknowledge held and quarantined receipts", cmdReview},
		{"repin", "move a week pinned too early to its end plus DIGEST_SETTLE (recorded)", cmdRepin},
		{"suppression", "list, add or remove suppressed customers and addresses (no digest for them)", cmdSuppression},
		{"events", "the provider events digest serve recorded, and the watermarks of the events look-up", cmdEvents},
		{"prune", "delete receipts older than the replay horizon", cmdPrune},
		{"schedule", "run weekly on a cron schedule (instead of a CronJob)", cmdSchedule},
		{"serve", "the HTTP service: one-click unsubscribe (RFC 8058), health, readiness, metrics", cmdServe},
		{"preview", "render one customer's digest of a week; sends nothing", cmdPreview},
		{"send-test", "send a sample of a week's digests to an internal address, marked as tests", cmdSendTest},
		{"seed", "fill demo source tables, or write a demo snapshot file", cmdSeed},
		{"week", "print the ISO week of a date and its bounds", cmdWeek},
		{"key", "print the ledger key of one customer's digest", cmdKey},
		{"unsubscribe-token", "make or --verify a one-click unsubscribe token", cmdUnsubscribeToken},
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

Environment (each variable has a flag of the same name on the commands that
use it, except the secrets marked "env only": a command line shows in ps and
in shell history; give those in the environment or, better, their *_FILE):
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

// exitCode maps a command's error to its exit code and reports why: one
// log record, ERROR for 1 and 2, WARN for 3 and 4, with exit_code and
// reason, so that a CronJob's JSON log says why a run failed in the same
// stream as everything else. On a terminal the reason is one readable
// line instead.
func exitCode(env *Env, name string, err error) int {
	var ue *usageError
	var ee *exitError
	code, reason := ExitOK, ""
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &ue):
		// One line: a CronJob's log or a terminal shows the mistake, not
		// the whole help (that is on --help).
		code, reason = ExitUsage, fmt.Sprintf("%s (see \"digest %s --help\")", ue.msg, name)
	case errors.As(err, &ee):
		code = ee.code
		if ee.err != nil {
			reason = ee.err.Error()
		}
	default:
		code, reason = ExitFailure, err.Error()
	}
	reportExit(env, name, code, reason)
	return code
}

// exitMeaning names each non-zero exit code in the failure record.
var exitMeaning = map[int]string{
	ExitFailure: "failed", ExitUsage: "usage or configuration error",
	ExitIncomplete: "incomplete", ExitReview: "rows need review",
}

// reportExit writes why a command exits non-zero: on a terminal the
// human line "digest NAME: REASON"; otherwise one JSON record at the
// level DIGEST_LOG_LEVEL lets through (ERROR for 1 and 2, WARN for 3 and
// 4), {"msg":"digest NAME exited CODE: MEANING","command":…,"exit_code":…,
// "reason":…}.
func reportExit(env *Env, name string, code int, reason string) {
	if isTerminal(env.Stderr) {
		if reason != "" {
			fmt.Fprintf(env.Stderr, "digest %s: %s\n", name, reason)
		}
		return
	}
	if reason == "" {
		reason = exitMeaning[code]
	}
	level := slog.LevelError
	if code == ExitIncomplete || code == ExitReview {
		level = slog.LevelWarn
	}
	threshold := slog.LevelInfo
	if env.Getenv != nil {
		threshold = parseLogLevel(env.Getenv("DIGEST_LOG_LEVEL"))
	}
	log := newLogger(env, threshold)
	log.Log(context.Background(), level, fmt.Sprintf("digest %s exited %d: %s", name, code, exitMeaning[code]),
		"command", name, "exit_code", code, "reason", reason)
}

// newFlagSet returns a flag set whose --help prints help (the command's own
// text, then its flags with their types) to stdout. A parse error prints
// nothing here: parse turns it into one line on stderr.
func newFlagSet(env *Env, name, help string) *flag.FlagSet {
	fs := flag.NewFlagSet("digest "+name, flag.ContinueOnError)
	// The flag package calls Usage on --help and on every error alike;
	// parseRest prints the help for --help only, through this output.
	fs.SetOutput(&helpText{out: env.Stdout, text: help})
	fs.Usage = func() {}
	return fs
}

// helpText is a flag set's output: it discards what the flag package
// writes, and holds the command's help for parseRest to print.
type helpText struct {
	out  io.Writer
	text string
}

func (*helpText) Write(p []byte) (int, error) { return len(p), nil }

func (h *helpText) print(fs *flag.FlagSet) {
	fmt.Fprintf(h.out, "%s\nFlags:\n", strings.TrimRight(h.text, "\n"))
	printFlags(h.out, fs)
}

// printFlags lists fs's flags as flag.PrintDefaults does, except that a
// setting shows its value's type (int, float, duration) instead of
// "string".
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		if sv, ok := f.Value.(*settingValue); ok {
			typ = sv.kind
		}
		line := "  -" + f.Name
		if typ != "" {
			line += " " + typ
		}
		line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
		if d := f.DefValue; !slices.Contains([]string{"", "false", "0", "0s"}, d) { // zero values go unsaid
			if typ == "string" {
				d = strconv.Quote(d)
			}
			line += " (default " + d + ")"
		}
		fmt.Fprintln(w, line)
	})
}

// settingValue is the flag.Value of a setting: a string read later by the
// command, whose kind (int, float, duration or string) --help shows.
type settingValue struct {
	p    *string
	kind string
	// url: the setting is a URL (DIGEST_*_URL), which may hold a password
	// or token: String, and so --help's default, shows it redacted. The
	// command reads the value through p, never String.
	url bool
}

func (v *settingValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	if v.url {
		return redact.URL(*v.p)
	}
	return *v.p
}

func (v *settingValue) Set(s string) error { *v.p = s; return nil }

// settingKind is the type a setting's value has, for --help: from its
// default, or "float" for the rate (whose default is a whole number).
func settingKind(s setting) string {
	switch {
	case s.env == "DIGEST_RATE":
		return "float"
	case s.def == "":
		return "string"
	}
	if _, err := strconv.Atoi(s.def); err == nil {
		return "int"
	}
	if _, err := strconv.ParseFloat(s.def, 64); err == nil {
		return "float"
	}
	if _, err := time.ParseDuration(s.def); err == nil {
		return "duration"
	}
	return "string"
}

// parse parses flags and positional arguments in any order
// ("digest week 2026-12-31 --tz Europe/Berlin" works). It returns the
// positional arguments, then everything after the first "--" unchanged.
// Flag errors become usage errors of one line.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, rest, err := parseRest(fs, args)
	return append(pos, rest...), err
}

// parseRest is parse with the positional arguments before "--" and the
// arguments after it apart: "digest schedule ... -- RUN FLAGS" hands the
// latter to each run as they are.
func parseRest(fs *flag.FlagSet, args []string) (pos, rest []string, err error) {
	if i := slices.Index(args, "--"); i >= 0 {
		args, rest = args[:i], slices.Clone(args[i+1:])
	}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				if h, ok := fs.Output().(*helpText); ok {
					h.print(fs)
				}
				return nil, nil, err
			}
			return nil, nil, flagError(fs, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, rest, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// flagError rewrites the flag package's errors: an unknown flag is named
// with its dashes and the closest known flag.
func flagError(fs *flag.FlagSet, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return usagef("%v", err)
	}
	msg := fmt.Sprintf("unknown flag --%s", name)
	if near := closestFlag(fs, name); near != "" {
		msg += fmt.Sprintf(" (did you mean --%s?)", near)
	}
	return usagef("%s", msg)
}

// closestFlag returns fs's flag nearest to name by edit distance, if it is
// near enough to be a likely typo; "" otherwise.
func closestFlag(fs *flag.FlagSet, name string) string {
	best, bestD := "", len(name)/2+2
	fs.VisitAll(func(f *flag.Flag) {
		if d := editDistance(name, f.Name); d < bestD { // VisitAll is sorted: a tie keeps the first
			best, bestD = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
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

// noArgs parses flags and refuses positional arguments.
func noArgs(fs *flag.FlagSet, args []string) error {
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	return nil
}

func age(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(time.Second).String()
}

// weekAndZone reads --week and DIGEST_TZ: the week named, else the week
// before now in the zone. A bad --week is named before a bad zone.
func weekAndZone(env *Env, st *settings, week string) (digest.ISOWeek, *time.Location, error) {
	var w digest.ISOWeek
	var err error
	if week != "" {
		if w, err = weekOrPrevious(env, nil, week); err != nil {
			return w, nil, err
		}
	}
	loc, err := st.location()
	if err != nil {
		return w, nil, err
	}
	if week == "" {
		w = digest.PreviousWeekOf(env.now(), loc)
	}
	return w, loc, nil
}

// weekOrPrevious reads --week, or returns the week before now in loc.
func weekOrPrevious(env *Env, loc *time.Location, week string) (digest.ISOWeek, error) {
	if week != "" {
		w, err := digest.ParseISOWeek(week)
		if err != nil {
			return w, usagef("--week: %v", err)
		}
		return w, nil
	}
	return digest.PreviousWeekOf(env.now(), loc), nil
}
