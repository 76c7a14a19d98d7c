package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/run"
)

const statusHelp = `Usage: digest status [--week YYYY-Www] [--snapshot FILE.jsonl] [--shard I/N] [--send-empty] [--json]

Answers "is this week done?". Reads the source as the week's first run
pinned it (its as_of cutoff and zone; nothing is pinned, claimed or sent)
and counts the digests a run would send: built, not empty (unless
--send-empty, as given to the run), not suppressed, in --shard if given.
Against them, the week's receipts by state: settled (sent, failed or acknowledged; a
digest found at the provider is sent), needing review (held or
quarantined: "digest review list"), and the rest remaining; coverage is
settled / expected. Receipts carry no type or version (their key is an
HMAC): without --shard the counts are every receipt of the ISO week, of
any DIGEST_TYPE and DIGEST_VERSION. With --shard, the shard's digests are
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
needs_review, remaining, coverage, pruned, pruned_receipts, last_run
(run_id, mode, shard, exit_code, started_at, ended_at; null before any run), verdict
(complete, remaining, needs_review or not_run_yet) and exit_code.

Exit codes: 0 the week is complete, 3 digests remain (or the week was not
run yet), 4 some need review (outranks 3), 2 usage.

Examples:
  digest status                 # the week before now
  digest status --week 2026-W48
  digest status --week 2026-W48 --json
  digest status --week 2026-W48 --snapshot examples/snapshot.jsonl
  digest status --week 2026-W48 --shard 0/2
`

// Verdicts of status, in its JSON.
const (
	verdictComplete  = "complete"
	verdictRemaining = "remaining"
	verdictReview    = "needs_review"
	verdictNotRun    = "not_run_yet"
)

// weekStatus is what status reports; its JSON field names are stable.
type weekStatus struct {
	Week           string           `json:"week"`
	Type           string           `json:"type"`
	Version        string           `json:"version"`
	Pinned         bool             `json:"pinned"`
	AsOf           *time.Time       `json:"as_of"`
	Zone           string           `json:"zone"`
	Shard          string           `json:"shard"`
	Expected       *int64           `json:"expected"`
	NotBuilt       int64            `json:"not_built"`
	Receipts       map[string]int64 `json:"receipts"`
	Settled        int64            `json:"settled"`
	NeedsReview    int64            `json:"needs_review"`
	Remaining      *int64           `json:"remaining"`
	Coverage       *float64         `json:"coverage"`
	Pruned         bool             `json:"pruned"`
	PrunedReceipts int64            `json:"pruned_receipts"`
	LastRun        *ledger.RunEnd   `json:"last_run"`
	Verdict        string           `json:"verdict"`
	ExitCode       int              `json:"exit_code"`
}

func cmdStatus(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "status", statusHelp)
	st := register(fs, env, gLedger, gKeys, gDigest, gLog, gRetention)
	week := fs.String("week", "", "ISO week YYYY-Www (default: the week before now in DIGEST_TZ)")
	snap := fs.String("snapshot", "", "JSON Lines snapshot file (default: the PostgreSQL source relations)")
	shard := fs.String("shard", "", "I/N: only the digests of shard I of N; /N takes I from $JOB_COMPLETION_INDEX")
	sendEmpty := fs.Bool("send-empty", false, "count digests of customers with no activity, as a run given --send-empty sends them")
	asJSON := fs.Bool("json", false, "print one JSON object (for scripts) instead of a table")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	w, err := weekOrPrevious(env, st, *week)
	if err != nil {
		return err
	}
	loc, err := st.location()
	if err != nil {
		return err
	}
	sh, err := parseShard(*shard, env.Getenv("JOB_COMPLETION_INDEX"))
	if err != nil {
		return err
	}
	horizon, err := st.replayHorizon()
	if err != nil {
		return err
	}
	if *snap == "" && st.DatabaseURL == "" {
		return usagef("no source: pass --snapshot FILE.jsonl, or set DIGEST_DATABASE_URL to read digest_customers and digest_activity")
	}
	log := newLogger(env, st)
	var keys *digest.Keyring
	if !sh.All() {
		if keys, err = loadKeyring(st, log); err != nil {
			return err
		}
	}
	store, err := openLedger(ctx, st, log)
	if err != nil {
		return err
	}
	defer store.Close()

	spec := digest.Spec{Week: w, Location: loc, Type: st.Type, Version: st.Version}
	ws := &weekStatus{Week: w.String(), Type: st.Type, Version: st.Version, Shard: sh.String(), Receipts: map[string]int64{}}
	spec, pin, pinned, err := pinnedSpec(ctx, store, spec)
	if err != nil {
		return err
	}
	var expected []digest.Identity
	if pinned {
		ws.Pinned, ws.AsOf, ws.Zone = true, &pin.AsOf, spec.Location.String()
		source, closeSource, err := openSource(ctx, st, *snap, store, log)
		if err != nil {
			return err
		}
		expected, ws.NotBuilt, err = expectedDigests(ctx, source, spec, pin.AsOf, sh, *sendEmpty)
		closeSource()
		if err != nil {
			return err
		}
		n := int64(len(expected))
		ws.Expected = &n
	}
	c, err := store.Counts(ctx, w)
	if err != nil {
		return err
	}
	if !sh.All() {
		kr := keys
		if k, ok := keys.Pinned(pin.KeyID); ok {
			kr = k
		}
		if c.ByState, err = shardStates(ctx, store, w, kr, expected); err != nil {
			return err
		}
	}
	stones, err := store.Tombstones(ctx, digest.ISOWeek{})
	if err != nil {
		return err
	}
	if err := ws.lastRun(ctx, store, digest.SnapshotPin{Type: st.Type, Week: w, Version: st.Version}); err != nil {
		return err
	}
	ws.settle(c, stones)
	var rep ledger.RepeatReport
	if !*asJSON {
		if rep, err = store.Repeats(ctx, w, horizon); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(ws); err != nil {
			return err
		}
	} else if err := printStatus(env, w, ws, c, rep, stones); err != nil {
		return err
	}
	return ws.exit()
}

// expectedDigests reads the source as the week's runs do and returns the
// identities of the digests a run would send (run.Classify), and how many
// records could not be read or built.
func expectedDigests(ctx context.Context, source digest.Source, spec digest.Spec, asOf time.Time, sh digest.Shard, sendEmpty bool) ([]digest.Identity, int64, error) {
	var (
		ids      []digest.Identity
		notBuilt int64
	)
	q := digest.SourceQuery{Week: spec.Week, Location: spec.Location, AsOf: asOf, Shard: sh}
	for rec, err := range source.Records(ctx, q) {
		var bad *digest.BadRecordError
		if errors.As(err, &bad) {
			notBuilt++
			continue
		}
		if err != nil {
			return nil, 0, fmt.Errorf("read source: %w", err)
		}
		d, v, _ := run.Classify(rec, spec, sh, sendEmpty)
		switch v {
		case run.Send:
			ids = append(ids, d.Identity)
		case run.Invalid:
			notBuilt++
		}
	}
	return ids, notBuilt, ctx.Err()
}

// shardStates counts the receipts of the shard's digests by state: the
// week's receipts, read once in key order, matched to the digests' keys
// (any key id of the keyring, the pinned one first).
func shardStates(ctx context.Context, store ledger.Store, w digest.ISOWeek, kr *digest.Keyring, ids []digest.Identity) (map[digest.State]int64, error) {
	owner := map[digest.Key]int{}
	for i, id := range ids {
		for _, k := range kr.Candidates(id) {
			owner[k] = i
		}
	}
	state := map[int]digest.State{}
	f := ledger.ListFilter{Week: w, Limit: 1000}
	for {
		page, err := store.List(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, r := range page {
			if i, ok := owner[r.Key]; ok {
				if _, seen := state[i]; !seen {
					state[i] = r.State
				}
			}
		}
		if len(page) < f.PageSize() {
			break
		}
		f.After = page[len(page)-1].Key
	}
	out := map[digest.State]int64{}
	for _, s := range state {
		out[s]++
	}
	return out, nil
}

// lastRun adds how the last run of pin ended.
func (ws *weekStatus) lastRun(ctx context.Context, store ledger.Store, pin digest.SnapshotPin) error {
	e, ok, err := store.LastRun(ctx, pin)
	if err != nil || !ok {
		return err
	}
	ws.LastRun = &e
	return nil
}

// settle derives settled, review, remaining, coverage and the verdict.
func (ws *weekStatus) settle(c ledger.Counts, stones []digest.PruneTombstone) {
	for _, s := range receiptStates {
		ws.Receipts[string(s)] = c.ByState[s]
	}
	for _, t := range stones {
		if t.Pin.Week.String() == ws.Week && (t.Pin.Type == "" || (t.Pin.Type == ws.Type && t.Pin.Version == ws.Version)) {
			ws.Pruned, ws.PrunedReceipts = true, t.ReceiptsPruned
			break
		}
	}
	ws.Settled = c.Settled() + ws.PrunedReceipts // sent, failed, acknowledged
	ws.NeedsReview = c.NeedsReview()
	if ws.Expected != nil {
		rem := max(0, *ws.Expected-ws.Settled-ws.NeedsReview)
		ws.Remaining = &rem
		cov := 1.0
		if *ws.Expected > 0 {
			cov = float64(ws.Settled) / float64(*ws.Expected)
		}
		ws.Coverage = &cov
	}
	switch {
	case ws.NeedsReview > 0:
		ws.Verdict, ws.ExitCode = verdictReview, ExitReview
	case !ws.Pinned:
		ws.Verdict, ws.ExitCode = verdictNotRun, ExitIncomplete
	case *ws.Remaining > 0:
		ws.Verdict, ws.ExitCode = verdictRemaining, ExitIncomplete
	default:
		ws.Verdict, ws.ExitCode = verdictComplete, ExitOK
	}
}

// exit returns the error that makes status exit with ws.ExitCode, its
// message on stderr.
func (ws *weekStatus) exit() error {
	switch ws.Verdict {
	case verdictReview:
		return &exitError{code: ws.ExitCode, err: fmt.Errorf("%s: %d receipts need review: digest review list --week %s", ws.Week, ws.NeedsReview, ws.Week)}
	case verdictNotRun:
		return &exitError{code: ws.ExitCode, err: fmt.Errorf("%s: not run yet: no run has pinned the week", ws.Week)}
	case verdictRemaining:
		return &exitError{code: ws.ExitCode, err: fmt.Errorf("%s: %d of %d digests remain", ws.Week, *ws.Remaining, *ws.Expected)}
	}
	return nil
}

// printStatus prints the table: the lines status always printed (week,
// the states, total, oldest ages, needs review, observations, pruned),
// then what answers "is this week done?", then the pruned weeks.
func printStatus(env *Env, w digest.ISOWeek, ws *weekStatus, c ledger.Counts, rep ledger.RepeatReport, stones []digest.PruneTombstone) error {
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
	if ws.Shard != "all" {
		fmt.Fprintf(tw, "shard\t%s (receipts matched by key)\n", ws.Shard)
	} else {
		fmt.Fprintf(tw, "receipts of\tthe whole ISO week, any type and version (receipts carry neither)\n")
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
	if r := ws.LastRun; r != nil {
		fmt.Fprintf(tw, "last run\t%s, %s, shard %s, exit %d, run %s\n", r.EndedAt.UTC().Format(time.RFC3339), r.Mode, r.Shard, r.ExitCode, r.RunID)
	} else {
		fmt.Fprintf(tw, "last run\t-\n")
	}
	fmt.Fprintf(tw, "verdict\t%s\n", ws.Verdict)
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
