package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/weekstatus"
)

const reviewHelp = `Usage:
  digest review list [--state held|quarantined] [--week YYYY-Www] [--limit N] [--json]
  digest review show KEY
  digest review show --customer ID --week YYYY-Www
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
send start in the history: search the provider from the first, and the
digest type and content version the receipt was claimed under ("unknown"
for one made before receipts stored them). "show --customer ID --week W"
shows the customer's receipt of the week under DIGEST_VERSION and under
every other version of DIGEST_TYPE the week was run as (a resend as a new
version, run --resend-as-new-version, leaves one of each), each found by
its key under any key id of the keyring. With
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
  digest review show --customer customer_8421 --week 2026-W48
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
	st := register(fs, env, "review")
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
	customer := fs.String("customer", "", "show, with --week instead of a KEY: the customer's receipts of the week under every content version")
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
	rv := parseReview(st)
	rv.ledger.changes = acts // list and show only read
	if acts && len(rest) == 0 && *week != "" {
		return reviewWeek(ctx, env, rv, sub, *week, *state, *reason, *by, *ref, *fromProvider, *unsent, *acceptDuplicates)
	}
	if *customer != "" {
		if sub != "show" || len(rest) > 0 || *week == "" {
			return usagef("--customer goes with show and --week, instead of a KEY")
		}
		return reviewShowCustomer(ctx, env, st, rv, *customer, *week)
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
	store, err := openLedger(ctx, env, rv.ledger, newLogger(env, rv.level))
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
		lookup, err := rv.lookup, rv.lookupErr
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
		pushReviewedKey(ctx, env, rv.push, store, key)
		return nil
	case "mark-sent":
		if *ref == "" {
			return usagef("mark-sent needs --ref: the provider's reference of the message")
		}
		if err := store.MarkSent(ctx, key, *ref, act); err != nil {
			return reviewErr(key, err)
		}
		fmt.Fprintf(env.Stdout, "marked %s sent as %s\n", key, *ref)
		pushReviewedKey(ctx, env, rv.push, store, key)
		return nil
	case "acknowledge":
		if err := store.Acknowledge(ctx, key, *unsent, act); err != nil {
			return reviewErr(key, err)
		}
		fmt.Fprintf(env.Stdout, "acknowledged %s: kept as evidence, no longer needs review, never sent again\n", key)
		pushReviewedKey(ctx, env, rv.push, store, key)
		return nil
	}
	return usagef("unknown subcommand %q: want list, show, release, mark-sent or acknowledge", sub)
}

// reviewSettings are the settings of "digest review", parsed.
type reviewSettings struct {
	ledger    ledgerConfig
	level     slog.Level
	lookup    digest.Lookup // DIGEST_LOOKUP_URL; nil: none
	lookupErr error         // DIGEST_LOOKUP_URL unusable: refused by the actions that ask it
	push      weekPush
}

// parseReview reads review's settings. A look-up that does not parse is
// refused only by the actions that ask it (release, mark-sent --week):
// list, show and acknowledge work without one.
func parseReview(st *settings) reviewSettings {
	rv := reviewSettings{ledger: st.ledger(), level: st.logLevel(), push: st.weekPush()}
	rv.lookup, rv.lookupErr = openLookup(st)
	return rv
}

// receiptStates are the states a receipt can be in, in the order status
// prints them.
var receiptStates = weekstatus.ReceiptStates

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
		{"key", string(r.Key)}, {"state", string(r.State)}, {"message", sentLine(r)}, {"week", r.Week}, {"version", versionLine(r)},
		{"fingerprint", r.Fingerprint},
		{"conflicting fingerprint", r.ConflictFingerprint}, {"attempts", strconv.Itoa(r.Attempts)},
		{"send started", ts(r.SendStartedAt)},
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
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(env.Stdout, "\nhistory, oldest first:")
	for _, e := range events {
		fmt.Fprintf(env.Stdout, "  %s  %s\n", e.At.UTC().Format(time.RFC3339), historyLine(e))
	}
	return nil
}

// historyLine tells one event of a receipt's history in words: the state
// it moved to (and from), what happened, and the run that did it.
func historyLine(e ledger.Event) string {
	var line string
	switch {
	case e.From == "":
		line = "new receipt, " + string(e.To)
	case e.From == e.To:
		line = "still " + string(e.To)
	default:
		line = string(e.From) + " to " + string(e.To)
	}
	if d := oneLine(e.Detail); d != "" && d != string(e.To) {
		line += ": " + d
	}
	if e.RunID != "" {
		line += " (run " + e.RunID + ")"
	}
	return line
}

// versionLine is the type and content version r was claimed under.
func versionLine(r ledger.Receipt) string {
	if r.Version == "" {
		return "unknown (a receipt made before receipts stored their version)"
	}
	return r.Type + " " + r.Version
}

// reviewShowCustomer shows customer's receipt of week under each content
// version of the type the week was run as, DIGEST_VERSION first.
func reviewShowCustomer(ctx context.Context, env *Env, st *settings, rv reviewSettings, customer, week string) error {
	w, err := digest.ParseISOWeek(week)
	if err != nil {
		return usagef("--week: %v", err)
	}
	typ, version := st.get("DIGEST_TYPE"), st.get("DIGEST_VERSION")
	if err := (digest.Identity{Customer: customer, Week: w, Type: typ, Version: version}).Validate(); err != nil {
		return usagef("%v", err)
	}
	log := newLogger(env, rv.level)
	store, err := openLedger(ctx, env, rv.ledger, log)
	if err != nil {
		return err
	}
	defer store.Close()
	kr, err := loadKeyring(st.hmacKeys(), rv.ledger, log)
	if err != nil {
		return err
	}
	versions, err := weekVersions(ctx, store, w, typ, version)
	if err != nil {
		return err
	}
	found := 0
	for i, v := range versions {
		if i > 0 {
			fmt.Fprintln(env.Stdout)
		}
		cands := kr.Candidates(digest.Identity{Customer: customer, Week: w, Type: typ, Version: v})
		states, err := store.WeekStates(ctx, w, cands)
		if err != nil {
			return err
		}
		k := slices.IndexFunc(cands, func(k digest.Key) bool { _, ok := states[k]; return ok })
		if k < 0 {
			fmt.Fprintf(env.Stdout, "== %s %s: no receipt (key %s)\n", typ, v, cands[0])
			continue
		}
		found++
		fmt.Fprintf(env.Stdout, "== %s %s\n", typ, v)
		if err := reviewShow(ctx, env, store, cands[k]); err != nil {
			return err
		}
	}
	if found > 1 {
		fmt.Fprintf(env.Stdout, "\n%d receipts of %s for this customer, one per version: each version is a digest of its own\n", found, w)
	}
	if found == 0 {
		return &exitError{code: ExitFailure, err: fmt.Errorf("no receipt of %s for this customer under %s", w, strings.Join(versions, ", "))}
	}
	return nil
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
