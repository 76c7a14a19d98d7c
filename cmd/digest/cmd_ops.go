package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
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
	st := register(fs, env, gLedger, gLog)
	downTo := fs.Int64("down-to", 0, "roll the schema back to this migration version (1 or more) instead of upgrading it")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	down := false
	fs.Visit(func(f *flag.Flag) { down = down || f.Name == "down-to" })
	if down && *downTo < 1 {
		return usagef("--down-to %d: a version of 1 or more (1 is the first migration, which creates the ledger)", *downTo)
	}
	log := newLogger(env, st)
	if err := checkDatabaseURL(st.DatabaseURL); err != nil {
		return err
	}
	store, err := openStore(ctx, ledger.Config{DatabaseURL: st.DatabaseURL, Path: st.LedgerPath, Logger: log})
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

// statusPrunedWeeks bounds the list of pruned weeks status prints.
const statusPrunedWeeks = 20

// prunedLine says whether week was pruned.
func prunedLine(week digest.ISOWeek, stones []digest.PruneTombstone) string {
	for _, t := range stones {
		if t.Pin.Week == week {
			return "yes: a run refuses it unless given --resend-pruned-week"
		}
	}
	return "no"
}

// printPrunedWeeks lists the pruned weeks, newest first.
func printPrunedWeeks(env *Env, stones []digest.PruneTombstone) error {
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	if len(stones) > 0 {
		fmt.Fprintln(tw, "\nPRUNED WEEK\tTYPE\tVERSION\tRECEIPTS\tFIRST PRUNED\tLAST PRUNED")
	}
	for i, t := range stones {
		if i == statusPrunedWeeks {
			fmt.Fprintf(tw, "... %d more\t\n", len(stones)-i)
			break
		}
		typ, version := t.Pin.Type, t.Pin.Version
		if typ == "" {
			typ, version = "(all)", "(all)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", t.Pin.Week, typ, version, t.ReceiptsPruned,
			t.FirstPrunedAt.Format(time.RFC3339), t.LastPrunedAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

func age(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(time.Second).String()
}

func weekOrPrevious(env *Env, st *settings, week string) (digest.ISOWeek, error) {
	if week != "" {
		w, err := digest.ParseISOWeek(week)
		if err != nil {
			return w, usagef("--week: %v", err)
		}
		return w, nil
	}
	loc, err := st.location()
	if err != nil {
		return digest.ISOWeek{}, err
	}
	return digest.PreviousWeekOf(env.now(), loc), nil
}

const pruneHelp = `Usage: digest prune --older-than DURATION [--dry-run] [--include-held] [--include-quarantined]

Deletes settled receipts (sent and failed, with their history) last
updated more than DURATION ago, and observations recorded before then:
once a week can no longer be replayed, its receipts have done their job.
DURATION takes Go units and days (2160h, 90d) and may not be shorter than
the replay horizon (DIGEST_REPLAY_HORIZON, default 90d, at least 14d):
"--older-than 1h" is refused (exit 2).

Never deleted, whatever their age: claimed receipts (a run holds them, or
crashed holding them, perhaps mid-send), retryable ones (perhaps sent
already), and every receipt of a week whose run started within DURATION
(a backfill under way). Held and quarantined receipts are kept unless
named.

First, a prune ends the claims no run will finish: receipts of weeks
older than DURATION (no run of the week started since) still claimed
with their lease expired by the ledger's clock, or retryable, which a
crashed run left (a sharded run cannot end those of customers deleted
from the source, suppressed or out of the week). Each ends as a run ends
a suppressed customer's: held (maybe sent, for "digest review") when its
send may have started, else failed ("claim ended by prune: no run
finished it"), with a history row; a later prune deletes the failed
ones. A live claim is never touched. The output counts them.

A prune leaves a tombstone for each week it took receipts from (per
type and content version pinned for the week; "digest status" lists them):
those receipts were the only record that their digests went out, so a
later "digest run" of the week refuses (exit 2) unless given
--resend-pruned-week. A dry run only counts: it deletes nothing and leaves
no tombstone. Prints how many receipts went (or would go), by week.

On PostgreSQL, where receipts is partitioned by ISO week, a week whose
partition holds nothing but such receipts goes whole: its partition is
dropped (no per-row delete; it briefly locks receipts against every run,
so prune outside sending hours). The output says which weeks went so.

Examples:
  digest prune --older-than 90d --dry-run
  digest prune --older-than 90d
  digest prune --older-than 30d --replay-horizon 30d
`

func cmdPrune(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "prune", pruneHelp)
	st := register(fs, env, gLedger, gLog, gPush, gRetention)
	st.changesLedger()
	olderThan := fs.String("older-than", "", "age of the receipts to delete, e.g. 90d or 2160h; at least the replay horizon (required)")
	dry := fs.Bool("dry-run", false, "count, delete nothing, leave no tombstone")
	held := fs.Bool("include-held", false, "also delete held receipts")
	quar := fs.Bool("include-quarantined", false, "also delete quarantined receipts")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	d, err := parseAge(*olderThan)
	if err != nil {
		return err
	}
	horizon, err := st.replayHorizon()
	if err != nil {
		return err
	}
	if d < horizon {
		return usagef("--older-than %s is shorter than the replay horizon %s (DIGEST_REPLAY_HORIZON): "+
			"a week that young may still be run again, and its receipts are what stop a resend; nothing deleted", *olderThan, days(horizon))
	}
	log := newLogger(env, st)
	store, err := openLedger(ctx, env, st, log)
	if err != nil {
		return err
	}
	defer store.Close()
	// The age, not a cutoff from env.now(): the ledger cuts by its own
	// clock, so a machine whose clock runs ahead cannot take the receipts
	// of a week being run (ledger.PruneRequest).
	res, err := store.Prune(ctx, ledger.PruneRequest{OlderThan: d, IncludeHeld: *held, IncludeQuarantined: *quar, DryRun: *dry})
	if err != nil {
		return err
	}
	verb := "pruned"
	if *dry {
		verb = "would prune"
	}
	fmt.Fprintf(env.Stdout, "%s %d receipts older than %s\n", verb, res.Receipts, *olderThan)
	for _, w := range res.Weeks {
		how := ""
		if w.Dropped {
			how = " (its partition dropped whole)"
			if *dry {
				how = " (its partition would be dropped whole)"
			}
		}
		fmt.Fprintf(env.Stdout, "  %s  %d receipts%s\n", w.Week, w.Receipts, how)
	}
	switch {
	case *dry:
		fmt.Fprintf(env.Stdout, "would end %d claims no run finished (claimed with the lease expired, or retryable) older than %s\n", res.ClaimsEnded, *olderThan)
	default:
		fmt.Fprintf(env.Stdout, "ended %d claims no run finished older than %s: %d held (their send may have started: digest review), %d failed\n",
			res.ClaimsEnded, *olderThan, res.ClaimsHeld, res.ClaimsEnded-res.ClaimsHeld)
	}
	if !*dry && len(res.Weeks) > 0 {
		fmt.Fprintln(env.Stdout, "a run of these weeks now refuses unless given --resend-pruned-week")
	}
	if !*dry {
		recordPrune(ctx, env, st, log, res.Receipts)
	}
	return nil
}

// parseAge reads --older-than: a Go duration or a whole number of days.
func parseAge(s string) (time.Duration, error) {
	if s == "" {
		return 0, usagef("--older-than is required, e.g. --older-than 90d")
	}
	if d, ok := parseDays(s); ok {
		return d, nil
	}
	return 0, usagef("--older-than %q: want a positive duration such as 90d or 2160h", s)
}

const reviewHelp = `Usage:
  digest review list [--state held|quarantined] [--week YYYY-Www] [--limit N] [--json]
  digest review show KEY
  digest review release KEY --reason TEXT [--accept-duplicates] [--by NAME]
  digest review release --week YYYY-Www --state held|quarantined --reason TEXT [--accept-duplicates] [--by NAME]
  digest review mark-sent KEY --ref PROVIDER_REF --reason TEXT [--by NAME]
  digest review mark-sent --week YYYY-Www --from-provider --reason TEXT [--by NAME]
  digest review acknowledge KEY --reason TEXT [--unsent] [--by NAME]
  digest review acknowledge --week YYYY-Www --state held|quarantined --reason TEXT [--unsent] [--by NAME]

Operator work on receipts that wait for a person. A held receipt is a send
that may have reached the provider when nobody could tell: find the message
at the provider by its key (the Message-ID and the X-Digest-Key header carry
it), then either mark it sent with the provider's reference, or release it
so that the next run sends it. A quarantined receipt's snapshot changed
under an existing key: investigate the source; release adopts the new
content if the old one was never sent. Every action is recorded in the
receipt's history with who and why. KEY is what "digest key" prints.

"list" and "show" say per receipt whether its message was sent, maybe
sent or not sent; the two cases need opposite actions. Sent (quarantined
after the send: the customer's data changed once they had the digest):
acknowledge it. The receipt becomes acknowledged, kept with both
fingerprints, the sent time and the provider reference as evidence; it no
longer needs review, no run sends it again or quarantines it again, and
status counts it settled. Not sent, or maybe sent: release it (a maybe-sent
one is looked up before it is sent again), or mark-sent a held one found at
the provider. acknowledge refuses those unless --unsent says you close them
knowingly: their customer then never gets this digest. "list --state
failed" shows a failed receipt's address key (a bounce: see the runbook's
suppression).

"show" prints when the send started (kept across takeovers) and every
send start in the history: search the provider from the first. With
--week instead of a KEY, release and mark-sent act on every receipt of
that week: release and acknowledge those in --state; mark-sent
--from-provider asks the look-up (DIGEST_LOOKUP_URL, from the environment)
about each held one, marks sent those it finds, and leaves the rest held.

Releasing a held receipt needs evidence that its message did not reach
the provider, since the next run sends it without asking: release (by KEY
or --week) first asks the look-up (DIGEST_LOOKUP_URL) about each held
receipt. Found: it is marked sent, not released. Not found: released.
Without a look-up, or when it cannot tell, the receipt is refused and
stays held (exit 1, with the count), unless --accept-duplicates says you
release it knowing its customer may get the digest twice (kept in the
history). A quarantined receipt keeps its maybe-sent mark when released:
the next run looks it up itself.

Exit codes: 0 done (a bulk action also when some receipts were left: it
says how many and why), 1 the receipt is missing or in the wrong state for
the action (acknowledge of one not known to be sent without --unsent; a
release that refused maybe-sent receipts: it says how many), 2 usage.

Examples:
  digest review list
  digest review show k1:3f2a...
  digest review release k1:3f2a... --reason "not in provider logs (ticket OPS-142)" --accept-duplicates
  digest review mark-sent k1:3f2a... --ref 0a1b2c --reason "found in provider activity"
  digest review mark-sent --week 2026-W48 --from-provider --reason "provider outage OPS-150"
  DIGEST_LOOKUP_URL=postmark+https://api.postmarkapp.com digest review release --week 2026-W48 --state held --reason "outage OPS-150"
  digest review release --week 2026-W48 --state held --reason "provider confirmed none delivered (OPS-150)" --accept-duplicates
  digest review list --week 2026-W48 --json
  digest review acknowledge --week 2026-W48 --state quarantined --reason "email changed after the send (OPS-160)"
  digest review list --week 2026-W48 --state failed
`

func cmdReview(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "review", reviewHelp)
	st := register(fs, env, gLedger, gLog)
	st.changesLedger()
	state := fs.String("state", "", "list only this state (default: held and quarantined)")
	week := fs.String("week", "", "list only this ISO week; release and mark-sent without a KEY: act on every receipt of it")
	limit := fs.Int("limit", 100, "list at most this many of each state (the list says how many more there are)")
	reason := fs.String("reason", "", "why (required for release, mark-sent and acknowledge; kept in the history)")
	unsent := fs.Bool("unsent", false, "acknowledge: also close receipts not known to be sent (their customer never gets this digest; release is what sends them)")
	by := fs.String("by", env.Getenv("USER"), "who (kept in the history)")
	ref := fs.String("ref", "", "the provider's reference of the message (mark-sent)")
	acceptDuplicates := fs.Bool("accept-duplicates", false, "release: also release held (maybe-sent) receipts no look-up found missing at the provider; their customers may get the digest twice")
	fromProvider := fs.Bool("from-provider", false, "mark-sent --week: ask the look-up (DIGEST_LOOKUP_URL) about every held receipt of the week")
	asJSON := fs.Bool("json", false, "list: print JSON (for scripts) instead of a table")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("want a subcommand: list, show, release, mark-sent or acknowledge")
	}
	sub, rest := pos[0], pos[1:]
	if !slices.Contains([]string{"list", "show", "release", "mark-sent", "acknowledge"}, sub) {
		return usagef("unknown subcommand %q: want list, show, release, mark-sent or acknowledge", sub)
	}
	acts := sub == "release" || sub == "mark-sent" || sub == "acknowledge"
	st.changes = acts // list and show only read
	if acts && len(rest) == 0 && *week != "" {
		return reviewWeek(ctx, env, st, sub, *week, *state, *reason, *by, *ref, *fromProvider, *unsent, *acceptDuplicates)
	}
	var key digest.Key
	if sub != "list" {
		if len(rest) != 1 {
			return usagef("%s wants one KEY", sub)
		}
		if key, err = digest.ParseKey(rest[0]); err != nil {
			return usagef("%v", err)
		}
	} else if len(rest) > 0 {
		return usagef("list takes no arguments")
	} else if *state != "" && !slices.Contains(receiptStates, digest.State(*state)) {
		return usagef("--state %q: want one of %s", *state, joinStates(receiptStates))
	}
	if acts && strings.TrimSpace(*reason) == "" {
		return usagef("%s needs --reason: the history keeps why", sub)
	}
	if *by == "" {
		*by = "operator"
	}
	store, err := openLedger(ctx, env, st, newLogger(env, st))
	if err != nil {
		return err
	}
	defer store.Close()
	act := ledger.Action{By: *by, Reason: *reason}
	switch sub {
	case "list":
		if *asJSON {
			return reviewListJSON(ctx, env, store, *state, *week, *limit)
		}
		return reviewList(ctx, env, store, *state, *week, *limit)
	case "show":
		return reviewShow(ctx, env, store, key)
	case "release":
		lookup, err := openLookup(st)
		if err != nil {
			return err
		}
		bindLookup(lookup, store)
		did, lookupErr, err := ledger.ReleaseWithEvidence(ctx, store, key, lookup, *acceptDuplicates, act)
		if errors.Is(err, ledger.ErrMaybeSent) {
			n := 0
			if lookupErr != nil {
				n = 1
			}
			return &exitError{code: ExitFailure, err: fmt.Errorf("%s: refused to release 1 maybe-sent receipt: %s", key, maybeSentAdvice(lookup, n))}
		}
		if err != nil {
			return reviewErr(key, err)
		}
		if did == ledger.FoundAtProvider {
			fmt.Fprintf(env.Stdout, "%s found at the provider: marked sent, not released\n", key)
		} else {
			fmt.Fprintf(env.Stdout, "released %s: the next run sends it\n", key)
		}
		pushReviewedKey(ctx, env, st, store, key)
		return nil
	case "mark-sent":
		if *ref == "" {
			return usagef("mark-sent needs --ref: the provider's reference of the message")
		}
		if err := store.MarkSent(ctx, key, *ref, act); err != nil {
			return reviewErr(key, err)
		}
		fmt.Fprintf(env.Stdout, "marked %s sent as %s\n", key, *ref)
		pushReviewedKey(ctx, env, st, store, key)
		return nil
	case "acknowledge":
		if err := store.Acknowledge(ctx, key, *unsent, act); err != nil {
			return reviewErr(key, err)
		}
		fmt.Fprintf(env.Stdout, "acknowledged %s: kept as evidence, no longer needs review, never sent again\n", key)
		pushReviewedKey(ctx, env, st, store, key)
		return nil
	}
	return usagef("unknown subcommand %q: want list, show, release, mark-sent or acknowledge", sub)
}

// receiptStates are the states a receipt can be in, in the order status
// prints them.
var receiptStates = []digest.State{digest.StateClaimed, digest.StateSent, digest.StateRetryable, digest.StateFailed, digest.StateHeld, digest.StateQuarantined, digest.StateAcknowledged}

func joinStates(states []digest.State) string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return strings.Join(out, ", ")
}

func reviewErr(key digest.Key, err error) error {
	if errors.Is(err, ledger.ErrNotFound) || errors.Is(err, ledger.ErrWrongState) || errors.Is(err, ledger.ErrWasSent) || errors.Is(err, ledger.ErrNotSent) {
		return &exitError{code: ExitFailure, err: fmt.Errorf("%s: %w", key, err)}
	}
	return err
}

func reviewList(ctx context.Context, env *Env, store ledger.Store, state, week string, limit int) error {
	pages, err := listPages(ctx, store, state, week, limit)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	// The address key column only when a listed receipt has one (failed).
	addressKeys := false
	for _, p := range pages {
		for _, r := range p.receipts {
			addressKeys = addressKeys || r.AddressKey != ""
		}
	}
	addrCol := func(r ledger.Receipt) string {
		if !addressKeys {
			return ""
		}
		if r.AddressKey == "" {
			return "-\t"
		}
		return r.AddressKey + "\t"
	}
	head := "KEY\tSTATE\tSENT\tWEEK\tATTEMPTS\tUPDATED\t"
	if addressKeys {
		head += "ADDRESS KEY\t"
	}
	fmt.Fprintln(tw, head+"LAST ERROR")
	n := 0
	var more []string
	for _, p := range pages {
		for _, r := range p.receipts {
			n++
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s%s\n", r.Key, r.State, r.Sentness(), r.Week, r.Attempts,
				r.UpdatedAt.UTC().Format(time.RFC3339), addrCol(r), oneLine(r.LastError))
		}
		if p.notListed > 0 {
			more = append(more, fmt.Sprintf("%d more %s", p.notListed, p.state))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(more) > 0 {
		fmt.Fprintf(env.Stdout, "truncated at --limit %d per state: %s not listed (raise --limit, or narrow with --week)\n", limit, strings.Join(more, " and "))
	}
	if n == 0 {
		fmt.Fprintln(env.Stdout, "nothing waits for review")
	}
	return nil
}

// countListed counts the receipts f selects, a page at a time (rows that
// wait for review are few; no count is worth an index).
func countListed(ctx context.Context, store ledger.Store, f ledger.ListFilter) (int, error) {
	f.Limit = 1000
	n := 0
	for {
		rs, err := store.List(ctx, f)
		if err != nil {
			return 0, err
		}
		n += len(rs)
		if len(rs) < f.Limit {
			return n, nil
		}
		f.After = rs[len(rs)-1].Key
	}
}

func reviewShow(ctx context.Context, env *Env, store ledger.Store, key digest.Key) error {
	r, events, err := store.Show(ctx, key)
	if err != nil {
		return reviewErr(key, err)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	for _, kv := range [][2]string{
		{"key", string(r.Key)}, {"state", string(r.State)}, {"sent", sentLine(r)}, {"week", r.Week}, {"fingerprint", r.Fingerprint},
		{"conflicting fingerprint", r.ConflictFingerprint}, {"attempts", strconv.Itoa(r.Attempts)},
		{"maybe sent", strconv.FormatBool(r.MaybeSent)}, {"send started", ts(r.SendStartedAt)},
		{"first claimed", ts(r.FirstClaimed)}, {"last attempt", ts(r.LastAttempt)},
		{"next attempt", ts(r.NextAttempt)}, {"sent at", ts(r.SentAt)}, {"provider ref", r.ProviderRef},
		{"last error", oneLine(r.LastError)}, {"address key", r.AddressKey}, {"run", r.RunID},
	} {
		if kv[1] != "" {
			fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
		}
	}
	if starts := sendStarts(events); len(starts) > 0 {
		fmt.Fprintf(tw, "send starts\t%s\n", strings.Join(starts, ", "))
	}
	fmt.Fprintln(tw, "\nHISTORY\t")
	for _, e := range events {
		from := string(e.From)
		if from == "" {
			from = "(new)"
		}
		fmt.Fprintf(tw, "%s\t%s -> %s\t%s\t%s\n", e.At.UTC().Format(time.RFC3339), from, e.To, e.RunID, oneLine(e.Detail))
	}
	return tw.Flush()
}

// sentLine is whether r was sent, with the action that fits where one
// waits: the two cases of a quarantined receipt need opposite ones.
func sentLine(r ledger.Receipt) string {
	sent := r.Sentness()
	switch {
	case r.State == digest.StateQuarantined && sent == ledger.Sent:
		return string(sent) + " (changed after the send: digest review acknowledge)"
	case r.State == digest.StateQuarantined:
		return string(sent) + " (digest review release)"
	case r.State == digest.StateHeld:
		return string(sent) + " (look it up: digest review mark-sent, or release)"
	}
	return string(sent)
}

func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, s)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
