package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/weeklydigest/digest/ledger"
)

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
no tombstone. Prints how many receipts went (or would go), by week, then
the provider events and soft-bounce counts.

What the mail providers reported through "digest serve" has horizons of
its own, by the ledger's clock as well, and goes in the transaction that
deletes the receipts:

  provider events  received more than DIGEST_EVENTS_RETENTION ago
                   (--events-retention, default 90d, at least 14d and
                   DIGEST_EVENTS_LAG); kept longer: an event naming the key
                   of a receipt still in the ledger after this prune (the
                   events look-up of a maybe-sent digest and "digest
                   verify" read it; it goes with its receipt), and each
                   provider's newest event (its watermark)
  soft-bounce      an address's count of one ISO week, once it last
  counts           bounced there more than DIGEST_SOFT_BOUNCE_RETENTION ago
                   (--soft-bounce-retention, default 90d, at least 14d);
                   kept longer: the weeks a soft bounce still to come
                   counts in its streak (the DIGEST_SOFT_BOUNCE_WEEKS weeks
                   ending with the week of now less DIGEST_EVENTS_LAG)

A dry run counts them too. "digest status" shows the oldest row of each
of these tables; with DIGEST_PUSHGATEWAY_URL set, a prune pushes them
(digest_ledger_oldest_row_timestamp_seconds{table}).

On PostgreSQL, where receipts is partitioned by ISO week, a week whose
partition holds nothing but such receipts goes whole: its partition is
dropped (no per-row delete; it briefly locks receipts against every run,
so prune outside sending hours). The output says which weeks went so.

Examples:
  digest prune --older-than 90d --dry-run
  digest prune --older-than 90d
  digest prune --older-than 30d --replay-horizon 30d
  digest prune --older-than 90d --events-retention 30d
`

func cmdPrune(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "prune", pruneHelp)
	st := register(fs, env, "prune")
	st.changesLedger()
	olderThan := fs.String("older-than", "", "age of the receipts to delete, e.g. 90d or 2160h; at least the replay horizon (required)")
	dry := fs.Bool("dry-run", false, "count, delete nothing, leave no tombstone")
	held := fs.Bool("include-held", false, "also delete held receipts")
	quar := fs.Bool("include-quarantined", false, "also delete quarantined receipts")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	ps, err := parsePrune(st, *olderThan)
	if err != nil {
		return err
	}
	lc, level, pushgatewayURL, d, horizon := ps.ledger, ps.level, ps.pushgatewayURL, ps.olderThan, ps.horizon
	if d < horizon {
		return usagef("--older-than %s is shorter than the replay horizon %s (DIGEST_REPLAY_HORIZON): "+
			"a week that young may still be run again, and its receipts are what stop a resend; nothing deleted", *olderThan, days(horizon))
	}
	log := newLogger(env, level)
	store, err := openLedger(ctx, env, lc, log)
	if err != nil {
		return err
	}
	defer store.Close()
	// The age, not a cutoff from env.now(): the ledger cuts by its own
	// clock, so a machine whose clock runs ahead cannot take the receipts
	// of a week being run (ledger.PruneRequest).
	res, err := store.Prune(ctx, ledger.PruneRequest{OlderThan: d, IncludeHeld: *held, IncludeQuarantined: *quar, Events: ps.events, DryRun: *dry})
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
	fmt.Fprintf(env.Stdout, "%s %d provider events received more than %s ago (DIGEST_EVENTS_RETENTION; those of the receipts kept and each provider's newest stay)\n",
		verb, res.ProviderEvents, days(ps.events.ProviderEvents))
	fmt.Fprintf(env.Stdout, "%s %d soft-bounce counts last bounced more than %s ago (DIGEST_SOFT_BOUNCE_RETENTION; the weeks of streaks under way stay)\n",
		verb, res.SoftBounces, days(ps.events.SoftBounces))
	if !*dry {
		recordPrune(ctx, env, pushgatewayURL, log, store, res)
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

// pruneSettings are the settings of "digest prune", parsed, with the age
// --older-than names.
type pruneSettings struct {
	olderThan      time.Duration
	horizon        time.Duration // DIGEST_REPLAY_HORIZON, the least olderThan
	events         ledger.EventRetention
	ledger         ledgerConfig
	level          slog.Level
	pushgatewayURL string
}

func parsePrune(st *settings, olderThan string) (pruneSettings, error) {
	ps := pruneSettings{ledger: st.ledger(), level: st.logLevel(), pushgatewayURL: st.get("DIGEST_PUSHGATEWAY_URL")}
	var err error
	if ps.olderThan, err = parseAge(olderThan); err != nil {
		return ps, err
	}
	if ps.horizon, err = st.replayHorizon(); err != nil {
		return ps, err
	}
	ps.events, err = parseEventRetention(st)
	return ps, err
}

// parseEventRetention reads the retention of the provider events and
// soft-bounce counts, with the soft-bounce policy and events lag their
// evidence rules need (ledger.EventRetention).
func parseEventRetention(st *settings) (ledger.EventRetention, error) {
	var (
		r   ledger.EventRetention
		err error
	)
	if r.ProviderEvents, err = st.eventRetention("DIGEST_EVENTS_RETENTION"); err != nil {
		return r, err
	}
	if r.SoftBounces, err = st.eventRetention("DIGEST_SOFT_BOUNCE_RETENTION"); err != nil {
		return r, err
	}
	if r.Policy.SoftBounceWeeks, err = st.positiveInt("DIGEST_SOFT_BOUNCE_WEEKS", 52); err != nil {
		return r, err
	}
	if r.Lag, err = st.duration("DIGEST_EVENTS_LAG"); err != nil {
		return r, err
	}
	if r.ProviderEvents < r.Lag {
		return r, usagef("DIGEST_EVENTS_RETENTION=%s is shorter than DIGEST_EVENTS_LAG=%s: an event still arriving late must find its first copy", days(r.ProviderEvents), r.Lag)
	}
	return r, nil
}
