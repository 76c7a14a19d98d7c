package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/weekstatus"
)

const statusHelp = `Usage: digest status [--week YYYY-Www] [--snapshot FILE.jsonl] [--shard I/N] [--send-empty] [--customers] [--json]

Answers "is this week done?": every customer of the week is accounted for.
Reads the source as the week's pin says (its as_of cutoff and zone;
nothing is pinned, claimed or sent; before any run that sends, as of the
week's cutoff, its end plus DIGEST_SETTLE, or now if earlier) and gives
each customer, in --shard if given, one outcome: sent, failed, pruned,
suppressed, skipped_empty, skipped_not_built (decided); held, quarantined
(need review); observed_not_sent (an observe run's, or the rest of a
--cohort run: "digest run --week W" sends them), pending (no run met
it), claimed_retryable (a run holds or will retry it), excluded_by_cutoff
(no activity as of an early cutoff, activity since). The verdict is
complete only when every customer is decided and nothing needs review.
A partial cutoff (run --early-cutoff), or an early pin an older version
made, is shown with the activity rows and customers it left out; the way
out is "digest repin" (docs/operations.md).

How it counts: each run records what its read of the source found for
its shard (the digests the pinned snapshot yields, the customers
suppressed, empty or not built, and the receipts of those not sent to),
and status compares that with the ledger's counts by state: a few small
queries whatever the size of the week. Where that cannot prove the
count (no run recorded every shard of the pin as it is, after a repin or
a keyring change, a partial cutoff, a pruned week, records not built,
another digest type in the week, customers without a receipt in a week
with observations, one shard of a week not settled in one state), or
with --customers, it reads the source and matches every customer to its
receipt by key; "counted from" says which, and why. The recorded reads
are the source as the last run of each shard saw it: a change to
digest_customers or digest_activity since is seen by the next run, or by
--customers.

It also counts the digests a run would send: built, not empty (unless
--send-empty, as given to the run), not suppressed, in --shard if given.
Against them, the week's receipts by state: settled (sent, failed or acknowledged; a
digest found at the provider is sent), needing review (held or
quarantined: "digest review list"), and the rest remaining; coverage is
settled / expected. Without --shard the counts are every receipt of the
ISO week, of any DIGEST_TYPE and DIGEST_VERSION, unless the week was also
run under another DIGEST_VERSION of the type: then status reads the
source, counts customers (each matched by key under every version), not
receipts, and says how many got the week under more than one version
(run --resend-as-new-version). With --shard, the shard's digests are
matched to their receipts by key, which needs the keyring (DIGEST_HMAC_KEYS)
and reads the week's receipts once.

Also prints the age of the oldest claimed and oldest retryable receipt,
how often observed keys repeated (observe mode), the last run of the week
(when it ended, its mode, shard and exit code), and whether the week was
pruned (a pruned week's receipts count as settled: prune deletes settled
receipts only, unless told otherwise), then every pruned week, newest
first: a run of a pruned week refuses unless given --resend-pruned-week.
A week no run has pinned yet is "not run yet".

--json prints one object for scripts: week, type, version, pinned, as_of,
zone, shard, expected, not_built, receipts (by state), settled,
needs_review, remaining (undecided customers), coverage, pruned,
pruned_receipts, last_run (run_id, mode, shard, exit_code, started_at,
ended_at; null before any run), week_end, cutoff (end + settle),
partial_cutoff, early_pin, repinned_from, excluded_rows and
excluded_customers (null when the pin is not early), customers (by
outcome), undecided, next_command, verdict (complete, remaining,
partial_cutoff, needs_review or not_run_yet), exit_code, counted_from
(ledger or source), source_reason (why the source was read),
other_versions (the week's other versions of the type),
customers_more_than_one_version and resent_as_new_version (who resent the
week as this version and why, as its pin keeps it; absent when nobody did).

Last, the oldest row of each table prune keeps for a horizon (receipts:
their oldest ISO week; observations, provider_events, soft_bounces), with
its age: older than its horizon means prune has not run, or keeps it as
evidence ("digest prune --help"). In --json, retention: one object per
table, table, oldest (null when empty), age_seconds and, for receipts,
oldest_week.

With DIGEST_PUSHGATEWAY_URL set, status pushes the week's state (job
digest_week; docs/operations.md, "Week state").

Exit codes: 0 the week is complete, 3 customers remain undecided (or the
week was not run yet, or its cutoff is partial), 4 some need review
(outranks 3), 2 usage.

Examples:
  digest status                 # the week before now
  digest status --week 2026-W48
  digest status --week 2026-W48 --json
  digest status --week 2026-W48 --snapshot examples/snapshot.jsonl
  digest status --week 2026-W48 --shard 0/2
`

// Verdicts of status, in its JSON.
const (
	verdictComplete  = weekstatus.VerdictComplete
	verdictRemaining = weekstatus.VerdictRemaining
	verdictReview    = weekstatus.VerdictReview
	verdictNotRun    = weekstatus.VerdictNotRun
	verdictPartial   = weekstatus.VerdictPartial
)

func cmdStatus(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "status", statusHelp)
	st := register(fs, env, "status")
	week := fs.String("week", "", "ISO week YYYY-Www (default: the week before now in DIGEST_TZ)")
	snap := fs.String("snapshot", "", "JSON Lines snapshot file (default: the PostgreSQL source relations)")
	shard := fs.String("shard", "", "I/N: only the digests of shard I of N; /N takes I from $JOB_COMPLETION_INDEX")
	sendEmpty := fs.Bool("send-empty", false, "count digests of customers with no activity, as a run given --send-empty sends them")
	asJSON := fs.Bool("json", false, "print one JSON object (for scripts) instead of a table")
	full := fs.Bool("customers", false, "read every customer from the source and match it to its receipt, instead of comparing the runs' recorded reads with the ledger's counts")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	ss, err := parseStatus(st, env, *week, *shard, *snap)
	if err != nil {
		return err
	}
	w := ss.spec.Week
	log := newLogger(env, ss.level)
	store, err := openLedger(ctx, env, ss.ledger, log)
	if err != nil {
		return err
	}
	defer store.Close()
	keys, err := loadKeyring(ss.keys, ss.ledger, log) // customers are matched to receipts by key
	if err != nil {
		return err
	}
	source, closeSource, err := openSource(ctx, ss.ledger, *snap, store, log)
	if err != nil {
		return err
	}
	defer closeSource()

	q := weekstatus.Query{Spec: ss.spec, Settle: ss.settle, Shard: ss.shard, SendEmpty: *sendEmpty, Keys: keys, Now: env.now(), Full: *full}
	ws, c, stones, err := weekstatus.Compute(ctx, store, source, q)
	if err != nil {
		return err
	}
	ws.ExitCode = statusExitCode(ws.Verdict)
	pushWeekState(ctx, env, ss.pushgatewayURL, log, ws)
	var rep ledger.RepeatReport
	if !*asJSON {
		if rep, err = store.Repeats(ctx, w, ss.horizon); err != nil {
			return err
		}
	}
	kept := retention(ctx, store, env.now(), log)
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(statusOutput{Report: ws, Retention: kept}); err != nil {
			return err
		}
	} else if err := printStatus(env, w, ws, c, rep, stones); err != nil {
		return err
	} else if err := printRetention(env, kept); err != nil {
		return err
	}
	return statusExit(ws)
}

// statusSettings are the settings of "digest status", parsed, with the
// flags that name the week and shard.
type statusSettings struct {
	spec           digest.Spec // week, zone, type, version
	shard          digest.Shard
	settle         time.Duration
	horizon        time.Duration
	level          slog.Level
	ledger         ledgerConfig
	keys           keyConfig
	pushgatewayURL string
}

// parseStatus reads status's settings and its --week, --shard and
// --snapshot, and refuses a status with no source.
func parseStatus(st *settings, env *Env, week, shard, snap string) (statusSettings, error) {
	ss := statusSettings{level: st.logLevel(), ledger: st.ledger(), keys: st.hmacKeys(), pushgatewayURL: st.get("DIGEST_PUSHGATEWAY_URL")}
	ss.spec.Type, ss.spec.Version = st.get("DIGEST_TYPE"), st.get("DIGEST_VERSION")
	var err error
	if ss.spec.Week, ss.spec.Location, err = weekAndZone(env, st, week); err != nil {
		return ss, err
	}
	if ss.shard, err = parseShard(shard, env.Getenv("JOB_COMPLETION_INDEX")); err != nil {
		return ss, err
	}
	if ss.horizon, err = st.replayHorizon(); err != nil {
		return ss, err
	}
	if snap == "" && ss.ledger.DatabaseURL == "" {
		return ss, usagef("no source: pass --snapshot FILE.jsonl, or set DIGEST_DATABASE_URL to read digest_customers and digest_activity")
	}
	if ss.settle, err = st.duration("DIGEST_SETTLE"); err != nil {
		return ss, err
	}
	return ss, nil
}

// statusExitCode is the exit code of status for a verdict: 0 complete,
// 4 review, 3 otherwise.
func statusExitCode(verdict string) int {
	switch verdict {
	case verdictComplete:
		return ExitOK
	case verdictReview:
		return ExitReview
	}
	return ExitIncomplete
}

// statusExit returns the error that makes status exit with ws.ExitCode,
// its message on stderr.
func statusExit(ws *weekstatus.Report) error {
	cu := ws.Customers
	switch ws.Verdict {
	case verdictReview:
		return &exitError{code: ws.ExitCode, err: fmt.Errorf("%s: %d receipts need review: digest review list --week %s", ws.Week, ws.NeedsReview, ws.Week)}
	case verdictNotRun:
		return &exitError{code: ws.ExitCode, err: fmt.Errorf("%s: not run yet: no run that sends has pinned the week (%d customers observed, not sent; %d pending); after its cutoff %s: digest run --week %s",
			ws.Week, cu[weekstatus.ObservedNotSent], cu[weekstatus.Pending], ws.Cutoff.UTC().Format(time.RFC3339), ws.Week)}
	case verdictPartial:
		what := "partial cutoff (run --early-cutoff)"
		if ws.EarlyPin {
			what = "early pin (made by an older version before the week's end plus the settle time)"
		}
		return &exitError{code: ws.ExitCode, err: fmt.Errorf("%s: %s at %s, before the cutoff %s: %s activity rows of %s customers recorded since are not in its digests (%d customers have none as of the pin); the way out, once past the cutoff: %s (docs/operations.md)",
			ws.Week, what, ws.AsOf.UTC().Format(time.RFC3339), ws.Cutoff.UTC().Format(time.RFC3339), countOrDash(ws.ExcludedRows), countOrDash(ws.ExcludedCustomers), cu[weekstatus.Excluded], ws.NextCommand)}
	case verdictRemaining:
		return &exitError{code: ws.ExitCode, err: fmt.Errorf("%s: %d of %d customers undecided: %d observed, not sent (the rest of a --cohort run, or an observe run's), %d pending, %d claimed or retryable; send them: %s",
			ws.Week, ws.Undecided, cu.Total(), cu[weekstatus.ObservedNotSent], cu[weekstatus.Pending], cu[weekstatus.InFlight], ws.NextCommand)}
	}
	return nil
}

func countOrDash(n *int64) string {
	if n == nil {
		return "-"
	}
	return fmt.Sprint(*n)
}

// printStatus prints the table: the lines status always printed (week,
// the states, total, oldest ages, needs review, observations, pruned),
// then what answers "is this week done?", then the pruned weeks.
func printStatus(env *Env, w digest.ISOWeek, ws *weekstatus.Report, c ledger.Counts, rep ledger.RepeatReport, stones []digest.PruneTombstone) error {
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "week\t%s\n", ws.Week)
	var total int64
	for _, s := range receiptStates {
		fmt.Fprintf(tw, "%s\t%d\n", s, c.ByState[s])
		total += c.ByState[s]
	}
	fmt.Fprintf(tw, "total\t%d\n", total)
	fmt.Fprintf(tw, "oldest claimed\t%s\n", age(c.OldestClaimed))
	fmt.Fprintf(tw, "oldest retryable\t%s\n", age(c.OldestRetryable))
	fmt.Fprintf(tw, "needs review\t%d\n", ws.NeedsReview)
	if rep.Observations > 0 {
		fmt.Fprintf(tw, "observations\t%d of %d keys\n", rep.Observations, rep.Keys)
		fmt.Fprintf(tw, "repeats under 5m / same day / later / beyond horizon\t%d / %d / %d / %d\n", rep.UnderFiveMin, rep.SameDay, rep.Later, rep.BeyondHorizon)
	}
	fmt.Fprintf(tw, "pruned\t%s\n", prunedLine(w, stones))
	switch {
	case ws.Shard != "all":
		fmt.Fprintf(tw, "shard\t%s (receipts matched by key)\n", ws.Shard)
	case len(ws.OtherVersions) > 0:
		fmt.Fprintf(tw, "receipts of\t%s %s only, matched by key (the week was also run as %s)\n", ws.Type, ws.Version, strings.Join(ws.OtherVersions, ", "))
	default:
		fmt.Fprintf(tw, "receipts of\tthe whole ISO week, any type and version\n")
	}
	fmt.Fprintf(tw, "week end\t%s\n", ws.WeekEnd.UTC().Format(time.RFC3339))
	fmt.Fprintf(tw, "cutoff\t%s (the end plus DIGEST_SETTLE)\n", ws.Cutoff.UTC().Format(time.RFC3339))
	switch {
	case ws.PartialCutoff:
		fmt.Fprintf(tw, "pin\tpartial cutoff (--early-cutoff)\n")
	case ws.EarlyPin:
		fmt.Fprintf(tw, "pin\tearly pin: made before the cutoff by an older version, not marked partial\n")
	}
	if ws.RepinnedFrom != nil {
		fmt.Fprintf(tw, "repinned from\t%s\n", ws.RepinnedFrom.UTC().Format(time.RFC3339))
	}
	if ws.ExcludedRows != nil {
		fmt.Fprintf(tw, "excluded by the cutoff\t%d activity rows of %d customers recorded after as_of\n", *ws.ExcludedRows, *ws.ExcludedCustomers)
	}
	if ws.Pinned {
		fmt.Fprintf(tw, "as_of\t%s (%s)\n", ws.AsOf.UTC().Format(time.RFC3339), ws.Zone)
		fmt.Fprintf(tw, "expected\t%d %s %s digests\n", *ws.Expected, ws.Type, ws.Version)
		if ws.NotBuilt > 0 {
			fmt.Fprintf(tw, "not built\t%d source records (see a run's log)\n", ws.NotBuilt)
		}
		fmt.Fprintf(tw, "settled\t%d (sent, failed and acknowledged)\n", ws.Settled)
		fmt.Fprintf(tw, "remaining\t%d\n", *ws.Remaining)
		fmt.Fprintf(tw, "coverage\t%.1f%%\n", *ws.Coverage*100)
	} else {
		fmt.Fprintf(tw, "as_of\t- (not run yet: no run has pinned the week)\n")
		fmt.Fprintf(tw, "expected\t- (not run yet)\n")
	}
	fmt.Fprintf(tw, "customers\t%d\n", ws.Customers.Total())
	for _, o := range weekstatus.Outcomes {
		if n := ws.Customers[o]; n > 0 || o == weekstatus.Sent {
			fmt.Fprintf(tw, "  %s\t%d\n", o, n)
		}
	}
	if n := ws.Customers[weekstatus.ObservedNotSent]; n > 0 {
		fmt.Fprintf(tw, "observed, not sent\t%d: the cohort's remainder (or an observe run's); send them: digest run --week %s\n", n, ws.Week)
	}
	fmt.Fprintf(tw, "undecided\t%d\n", ws.Undecided)
	if ws.ResentAsNewVersion != "" {
		fmt.Fprintf(tw, "resent as new version\t%s\n", ws.ResentAsNewVersion)
	}
	if len(ws.OtherVersions) > 0 {
		fmt.Fprintf(tw, "customers under more than one version\t%d: sent the week as %s and as %s (a resend as a new version: digest run --resend-as-new-version)\n",
			ws.CustomersMoreThanOneVersion, ws.Version, strings.Join(ws.OtherVersions, " or "))
	}
	if r := ws.LastRun; r != nil {
		fmt.Fprintf(tw, "last run\t%s, %s, shard %s, exit %d, run %s\n", r.EndedAt.UTC().Format(time.RFC3339), r.Mode, r.Shard, r.ExitCode, r.RunID)
	} else {
		fmt.Fprintf(tw, "last run\t-\n")
	}
	if ws.CountedFrom == weekstatus.CountedFromSource {
		fmt.Fprintf(tw, "counted from\tsource, every customer looked up, as %s\n", ws.SourceReason)
	} else {
		fmt.Fprintf(tw, "counted from\tledger: the runs' recorded reads of the source against the receipts\n")
	}
	fmt.Fprintf(tw, "verdict\t%s\n", ws.Verdict)
	if ws.NextCommand != "" {
		fmt.Fprintf(tw, "next\t%s\n", ws.NextCommand)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printPrunedWeeks(env, stones)
}

// recordRunEnd records in the ledger how the run ended, for status. A
// failure to record is logged: the run's own result stands.
func recordRunEnd(ctx context.Context, env *Env, log *slog.Logger, store ledger.Store, cfg *run.Config, sum run.Summary, runErr error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pushTimeout)
	defer cancel()
	end := env.now()
	pin := digest.SnapshotPin{Type: cfg.Spec.Type, Week: cfg.Spec.Week, Version: cfg.Spec.Version}
	e := ledger.RunEnd{RunID: cfg.RunID, Mode: string(cfg.Mode), Shard: cfg.Shard.String(), ExitCode: codeOf(runErr),
		StartedAt: end.Add(-sum.Duration), EndedAt: end}
	if err := store.RecordRunEnd(ctx, pin, e); err != nil {
		log.Warn("record the run's end for status", "err", err)
	}
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
