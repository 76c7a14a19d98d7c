package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// reviewWeek runs a bulk action on one week's receipts: release --state,
// acknowledge --state, or mark-sent --from-provider.
func reviewWeek(ctx context.Context, env *Env, rv reviewSettings, sub, week, state, reason, by, ref string, fromProvider, unsent, acceptDuplicates bool) error {
	w, err := digest.ParseISOWeek(week)
	if err != nil {
		return usagef("--week: %v", err)
	}
	if strings.TrimSpace(reason) == "" {
		return usagef("%s needs --reason: the history keeps why", sub)
	}
	if by == "" {
		by = "operator"
	}
	act := ledger.Action{By: by, Reason: reason}
	var lookup digest.Lookup
	switch sub {
	case "release", "acknowledge":
		if state != string(digest.StateHeld) && state != string(digest.StateQuarantined) {
			return usagef("%s --week needs --state held or --state quarantined: say which receipts of the week to %s", sub, sub)
		}
		if sub == "release" {
			if lookup, err = rv.lookup, rv.lookupErr; err != nil {
				return err
			}
		}
	case "mark-sent":
		if !fromProvider || ref != "" {
			return usagef("mark-sent --week needs --from-provider (and no --ref): each receipt is marked with the reference the provider gives")
		}
		if lookup, err = rv.lookup, rv.lookupErr; err != nil {
			return err
		}
		if lookup == nil {
			return usagef("mark-sent --from-provider needs DIGEST_LOOKUP_URL: the provider to ask")
		}
	}
	store, err := openLedger(ctx, env, rv.ledger, newLogger(env, rv.level))
	if err != nil {
		return err
	}
	defer store.Close()
	bindLookup(lookup, store)
	defer pushReviewedWeek(ctx, env, rv.push, store, w) // the week's state after the change
	if sub == "acknowledge" {
		res, err := ledger.AcknowledgeWeek(ctx, store, w, digest.State(state), unsent, act)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "acknowledged %d %s receipts of %s: kept as evidence, no longer need review, never sent again", res.Done, state, w)
		if res.NotSent > 0 {
			fmt.Fprintf(env.Stdout, "; %d not (or maybe not) sent left %s: release them so the next run sends them, or acknowledge them naming --unsent", res.NotSent, state)
		}
		if res.Skipped > 0 {
			fmt.Fprintf(env.Stdout, " (%d skipped: changed meanwhile)", res.Skipped)
		}
		fmt.Fprintln(env.Stdout)
		return nil
	}
	if sub == "release" {
		res, err := ledger.ReleaseWeek(ctx, store, w, digest.State(state), lookup, acceptDuplicates, act)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "released %d %s receipts of %s: the next run sends them", res.Done, state, w)
		if res.MarkedSent > 0 {
			fmt.Fprintf(env.Stdout, "; %d found at the provider and marked sent, not released", res.MarkedSent)
		}
		if res.Skipped > 0 {
			fmt.Fprintf(env.Stdout, " (%d skipped: changed meanwhile, or sent under quarantine)", res.Skipped)
		}
		fmt.Fprintln(env.Stdout)
		if res.Refused > 0 {
			return &exitError{code: ExitFailure, err: fmt.Errorf("refused to release %d maybe-sent receipts of %s: %s", res.Refused, w, maybeSentAdvice(lookup, res.Errors))}
		}
		return nil
	}
	res, err := ledger.MarkSentFromProvider(ctx, store, w, lookup, act)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "marked %d held receipts of %s sent (found at the provider); %d not found and %d the look-up could not tell stay held\n",
		res.Done, w, res.NotFound, res.Errors)
	if res.Errors > 0 {
		return &exitError{code: ExitIncomplete, err: fmt.Errorf("%d look-ups failed; run it again later", res.Errors)}
	}
	return nil
}

// maybeSentAdvice says why a release of maybe-sent receipts was refused
// and what the operator can do; lookupErrors of them the look-up could
// not tell.
func maybeSentAdvice(lookup digest.Lookup, lookupErrors int) string {
	if lookup == nil {
		return "their send may have reached the provider and no look-up (DIGEST_LOOKUP_URL) can tell; find them at the provider and mark-sent them, or release with --accept-duplicates to send them again knowing some customers may get the digest twice"
	}
	return fmt.Sprintf("their send may have reached the provider and the look-up could not tell (%d failed); run it again later, or release with --accept-duplicates to send them again knowing some customers may get the digest twice", lookupErrors)
}

// listedReceipt is one receipt of "review list --json".
type listedReceipt struct {
	Key       string    `json:"key"`
	State     string    `json:"state"`
	Week      string    `json:"week"`
	Attempts  int       `json:"attempts"`
	Sent      string    `json:"sent"` // sent, maybe sent or not sent (ledger.Sentness)
	MaybeSent bool      `json:"maybe_sent"`
	SendStart time.Time `json:"send_started_at,omitzero"`
	UpdatedAt time.Time `json:"updated_at"`
	LastError string    `json:"last_error,omitempty"`
	// AddressKey of a failed receipt: the bounce's address, as an HMAC.
	AddressKey string `json:"address_key,omitempty"`
}

// reviewListJSON prints what reviewList prints, as one JSON object:
// {"receipts": [...], "not_listed": {"held": N}} (not_listed: beyond --limit).
func reviewListJSON(ctx context.Context, env *Env, store ledger.Store, state, week string, limit int) error {
	pages, err := listPages(ctx, store, state, week, limit)
	if err != nil {
		return err
	}
	out := struct {
		Receipts  []listedReceipt `json:"receipts"`
		NotListed map[string]int  `json:"not_listed"`
	}{Receipts: []listedReceipt{}, NotListed: map[string]int{}}
	for _, p := range pages {
		for _, r := range p.receipts {
			out.Receipts = append(out.Receipts, listedReceipt{Key: string(r.Key), State: string(r.State), Week: r.Week,
				Attempts: r.Attempts, Sent: string(r.Sentness()), MaybeSent: r.MaybeSent, SendStart: r.SendStartedAt, UpdatedAt: r.UpdatedAt,
				LastError: oneLine(r.LastError), AddressKey: r.AddressKey})
		}
		if p.notListed > 0 {
			out.NotListed[string(p.state)] = p.notListed
		}
	}
	enc := json.NewEncoder(env.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// listPage is what "review list" shows of one state: the first --limit
// receipts and how many more there are.
type listPage struct {
	state     digest.State
	receipts  []ledger.Receipt
	notListed int
}

// listPages reads what "review list" shows: per state (held and
// quarantined, or the one --state names), at most limit receipts.
func listPages(ctx context.Context, store ledger.Store, state, week string, limit int) ([]listPage, error) {
	if limit < 1 {
		return nil, usagef("--limit %d: want 1 or more", limit)
	}
	var w digest.ISOWeek
	if week != "" {
		var err error
		if w, err = digest.ParseISOWeek(week); err != nil {
			return nil, usagef("--week: %v", err)
		}
	}
	states := []digest.State{digest.StateHeld, digest.StateQuarantined}
	if state != "" {
		states = []digest.State{digest.State(state)}
	}
	var pages []listPage
	for _, s := range states {
		f := ledger.ListFilter{State: s, Week: w, Limit: limit}
		rs, err := store.List(ctx, f)
		if err != nil {
			return nil, err
		}
		p := listPage{state: s, receipts: rs}
		if len(rs) == limit {
			f.After = rs[len(rs)-1].Key
			if p.notListed, err = countListed(ctx, store, f); err != nil {
				return nil, err
			}
		}
		pages = append(pages, p)
	}
	return pages, nil
}

// sendStarts returns the times of the "send started" events: the first is
// where a search at the provider begins.
func sendStarts(events []ledger.Event) []string {
	var out []string
	for _, e := range events {
		if e.Detail == "send started" {
			out = append(out, e.At.UTC().Format(time.RFC3339))
		}
	}
	return out
}
