package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/weekstatus"
)

const repinHelp = `Usage: digest repin --week YYYY-Www --reason TEXT [--by NAME]

Moves a week's cutoff (its pinned as_of) to the week's end in its zone
plus DIGEST_SETTLE: the way out of a week pinned too early, by
"run --early-cutoff" (a partial cutoff) or by an older version that pinned
"now" at the week's first run, observe runs included ("digest status"
says "partial cutoff" or "early pin", with the activity it left out).
The move is recorded on the pin (where it was, when, --by and --reason);
it goes forward only, once, and only once the cutoff has passed.

After it, the next "digest run --week W" reads the week as of the new
cutoff: the customers the early cutoff left out get their digest; a
digest already sent whose content the later activity changed is
quarantined by its claim, never sent again (status counts it as needing
review until an operator closes it); the rest are already sent.

A run of the week under way reads the old cutoff to its end; repin
refuses while the week has claimed receipts (a run holds them, or crashed
less than a lease ago): wait, or let the lease expire, and repin. Even
when a run starts meanwhile, nothing is sent twice: each digest has one
key, and the ledger lets one claim of it send.

Exit codes: 0 moved, 2 usage (not pinned, not early, the cutoff still
ahead), 3 a run of the week holds claims (try again after it ends).

Examples:
  digest repin --week 2026-W49 --reason "pinned on Tuesday by v1.4 (OPS-210)"
  digest repin --week 2026-W49 --reason "early cutoff for the audit; now the whole week" --by alice
`

func cmdRepin(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "repin", repinHelp)
	st := register(fs, env, "repin")
	st.changesLedger()
	week := fs.String("week", "", "ISO week YYYY-Www (required)")
	reason := fs.String("reason", "", "why (required; kept on the pin)")
	by := fs.String("by", env.Getenv("USER"), "who (kept on the pin)")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	if *week == "" {
		return usagef("repin needs --week")
	}
	w, err := digest.ParseISOWeek(*week)
	if err != nil {
		return usagef("--week: %v", err)
	}
	if strings.TrimSpace(*reason) == "" {
		return usagef("repin needs --reason: the pin keeps why")
	}
	if *by == "" {
		*by = "operator"
	}
	rp, err := parseRepin(st)
	if err != nil {
		return err
	}
	settle, loc := rp.settle, rp.zone
	store, err := openLedger(ctx, env, rp.ledger, newLogger(env, rp.level))
	if err != nil {
		return err
	}
	defer store.Close()
	spec, wp, pinned, err := weekstatus.PinnedSpec(ctx, store, digest.Spec{Week: w, Location: loc, Type: rp.typ, Version: rp.version})
	if err != nil {
		return err
	}
	if !pinned {
		return usagef("week %s (%s %s) is not pinned: no run that sends has read it yet; nothing to move", w, rp.typ, rp.version)
	}
	cutoff := run.Cutoff(w, spec.Location, settle)
	if now := env.now(); now.Before(cutoff) {
		return usagef("week %s's cutoff, its end plus DIGEST_SETTLE=%s, is %s, still ahead: repin after it", w, settle, cutoff.Format(time.RFC3339))
	}
	c, err := store.Counts(ctx, w)
	if err != nil {
		return err
	}
	if n := c.ByState[digest.StateClaimed]; n > 0 {
		return &exitError{code: ExitIncomplete, err: fmt.Errorf("week %s has %d claimed receipts: a run of it is under way (or crashed less than a lease ago) and reads the old cutoff; repin after it ends (digest status --week %s)", w, n, w)}
	}
	pin := digest.SnapshotPin{Type: rp.typ, Week: w, Version: rp.version}
	from, err := store.Repin(ctx, pin, cutoff, ledger.Action{By: *by, Reason: *reason})
	switch {
	case errors.Is(err, ledger.ErrWrongState):
		return usagef("week %s is not pinned early: its cutoff %s is at or past the end plus DIGEST_SETTLE (%s), and not partial", w, wp.AsOf.Format(time.RFC3339), cutoff.Format(time.RFC3339))
	case errors.Is(err, ledger.ErrNotFound):
		return usagef("%v", err)
	case err != nil:
		return err
	}
	fmt.Fprintf(env.Stdout, "repinned %s (%s %s) from %s to %s (its end plus %s)\n", w, rp.typ, rp.version,
		from.UTC().Format(time.RFC3339), cutoff.Format(time.RFC3339), settle)
	fmt.Fprintf(env.Stdout, "next: digest run --week %s sends the customers the early cutoff left out; digests already sent whose content changed are quarantined, never sent again (digest review list --week %s)\n", w, w)
	pushReviewedWeek(ctx, env, rp, store, w)
	return nil
}

// parseRepin reads repin's settings: the week's (settle and zone refused
// when they do not parse) and, in the same weekPush, where the moved
// week's state is pushed.
func parseRepin(st *settings) (weekPush, error) {
	wp := weekPush{url: st.get("DIGEST_PUSHGATEWAY_URL"), level: st.logLevel(), ledger: st.ledger(), keys: st.hmacKeys(),
		typ: st.get("DIGEST_TYPE"), version: st.get("DIGEST_VERSION")}
	var err error
	if wp.settle, err = st.duration("DIGEST_SETTLE"); err != nil {
		return wp, err
	}
	if wp.zone, err = st.location(); err != nil {
		return wp, err
	}
	return wp, nil
}
