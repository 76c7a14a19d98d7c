package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/lookup"
)

const eventsHelp = `Usage: digest events list|show|watermark [flags]

The provider events "digest serve" recorded from the mail providers'
webhooks, and the watermarks the events look-up
(DIGEST_LOOKUP_URL=events:PROVIDER) reads.

  list       each provider: its events, the newest event's time, the
             operator's watermark, and the look-up's watermark (the later
             of the operator's and the newest less DIGEST_EVENTS_LAG).
  show       the events of one digest key (--key) at --provider, with the
             receipt's send time and whether the look-up would say found,
             not found or not yet.
  watermark  state that --provider's events are complete up to --until
             (RFC 3339): every message it took before then has its event
             in the ledger. The look-up then answers "not found" for a
             maybe-sent digest whose send started more than 5 minutes
             before it, and the next run sends that digest again: state it
             only after checking the provider's own log or console shows
             no webhook backlog and no failed deliveries to the intake.
             It only moves forward, never past the ledger's clock (a
             time to come is refused, exit 1); --reason and --by are kept.

Exit codes: 0 done; 1 the ledger failed; 2 usage or configuration error.

Examples:
  digest events list
  digest events show --provider ses --key k1:9c1e...
  digest events watermark --provider ses --until 2026-11-30T12:00:00Z --reason "SES console: no failed deliveries" --by alice
`

func cmdEvents(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "events", eventsHelp)
	st := register(fs, env, "events")
	provider := fs.String("provider", "", "show, watermark: the provider's name, as in /webhooks/{provider}")
	key := fs.String("key", "", "show: the digest key (KID:HEX)")
	until := fs.String("until", "", "watermark: the time (RFC 3339) the provider's events are complete up to")
	reason := fs.String("reason", "", "watermark: why it is known complete (required, kept)")
	by := fs.String("by", env.Getenv("USER"), "watermark: who (kept)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || !slices.Contains([]string{"list", "show", "watermark"}, pos[0]) {
		return usagef("want one subcommand: list, show or watermark")
	}
	lc, level, lag, err := parseEvents(st)
	if err != nil {
		return err
	}
	var at time.Time
	switch pos[0] {
	case "show":
		if *provider == "" || *key == "" {
			return usagef("show needs --provider and --key")
		}
		if _, err := digest.ParseKey(*key); err != nil {
			return usagef("--key: %v", err)
		}
	case "watermark":
		if *provider == "" || *until == "" || strings.TrimSpace(*reason) == "" {
			return usagef("watermark needs --provider, --until and --reason")
		}
		if at, err = time.Parse(time.RFC3339, *until); err != nil {
			return usagef("--until %q: want an RFC 3339 time such as 2026-11-30T12:00:00Z", *until)
		}
		if *by == "" {
			*by = "operator"
		}
	}
	store, err := openLedger(ctx, env, lc, newLogger(env, level))
	if err != nil {
		return err
	}
	defer store.Close()
	switch pos[0] {
	case "watermark":
		got, err := store.AdvanceWatermark(ctx, *provider, at, ledger.Action{By: *by, Reason: *reason})
		if err != nil {
			return err
		}
		if got.After(at) {
			fmt.Fprintf(env.Stdout, "%s: the watermark stays at %s (a later one was stated before)\n", *provider, got.Format(time.RFC3339))
			return nil
		}
		fmt.Fprintf(env.Stdout, "%s: events complete up to %s\n", *provider, got.Format(time.RFC3339))
		return nil
	case "show":
		return eventsShow(ctx, env, store, *provider, digest.Key(*key), lag)
	}
	wms, err := store.Watermarks(ctx)
	if err != nil {
		return err
	}
	if len(wms) == 0 {
		fmt.Fprintln(env.Stdout, "no provider events")
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tEVENTS\tNEWEST\tOPERATOR\tWATERMARK")
	for _, w := range wms {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", w.Provider, w.Events, timeOrDash(w.Newest), timeOrDash(w.Until), timeOrDash(w.At(lag)))
	}
	return tw.Flush()
}

func eventsShow(ctx context.Context, env *Env, store ledger.Store, provider string, key digest.Key, lag time.Duration) error {
	ev, err := store.EventEvidence(ctx, provider, key)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OCCURRED\tRECEIVED\tKIND\tID\tADDRESS_KEY\tDETAIL")
	for _, e := range ev.Events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Occurred.Format(time.RFC3339), e.Received.Format(time.RFC3339), e.Kind, e.ID, e.AddressKey(), oneLine(e.Detail))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	wm := ev.Watermark.At(lag)
	answer := "found"
	switch {
	case len(ev.Events) > 0:
	case !ev.Receipt:
		answer = "cannot tell: no receipt"
	case wm.After(ev.SendAt.Add(lookup.ClockMargin)):
		answer = "not found: the watermark is past the send"
	default:
		answer = "not yet: the watermark is not past the send (the run holds it)"
	}
	fmt.Fprintf(env.Stdout, "send started %s, watermark %s: %s\n", timeOrDash(ev.SendAt), timeOrDash(wm), answer)
	return nil
}

func timeOrDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// parseEvents reads events's settings: the ledger, the log level and the
// events look-up's lag, shown against each provider's events.
func parseEvents(st *settings) (ledgerConfig, slog.Level, time.Duration, error) {
	lag, err := st.duration("DIGEST_EVENTS_LAG")
	return st.ledger(), st.logLevel(), lag, err
}
