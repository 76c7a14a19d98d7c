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
)

const suppressionHelp = `Usage:
  digest suppression list [--customer ID | --address ADDRESS | --customer-key KEY | --address-key KEY] [--history] [--limit N]
  digest suppression add (--customer ID | --address ADDRESS | --customer-key KEY | --address-key KEY) [--reason REASON] [--by NAME]
  digest suppression remove (--customer ID | --address ADDRESS | --customer-key KEY | --address-key KEY) --reason TEXT [--by NAME]

The suppression list in the ledger: customers and addresses that get no
digest whatever the source says. Every run looks its customers up in it
before claiming (one query a batch) and counts those it finds as
suppressed, like a customer with unsubscribed_at in the source (which is
honoured too). The one-click unsubscribe endpoint ("digest serve") adds to
it; operators add and remove here.

The ledger holds only keys: the HMAC of the customer id ("customer|ID") or
of the address ("address|" and the address in lower case) under the HMAC
keyring, never an id or address in clear. --customer and --address compute
the keys (under every key id of the keyring: a suppression made before a
rotation is found); --address-key takes the address_key a permanent
rejection's log line carries, --customer-key a key "list" printed.

add: --reason is one of unsubscribe, hard_bounce, complaint, operator, soft_bounce
(default operator); adding one already there changes nothing. remove:
--reason is free text and required. Both are kept in the history with
--by ("list --history" shows it). A removed customer gets the next run's
digest.

Exit codes: 0 done (add of one already suppressed included); 1 remove
found nothing to remove, or the ledger failed; 2 usage or configuration
error.

Examples:
  digest suppression add --customer cust_0001 --reason operator --by alice
  digest suppression add --address-key k1:9c1e... --reason hard_bounce --by alice
  digest suppression list
  digest suppression list --customer cust_0001 --history
  digest suppression remove --customer cust_0001 --reason "asked to subscribe again (ticket OPS-210)" --by alice
`

func cmdSuppression(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "suppression", suppressionHelp)
	st := register(fs, env, "suppression")
	st.changesLedger()
	customer := fs.String("customer", "", "the customer id")
	address := fs.String("address", "", "the email address")
	customerKey := fs.String("customer-key", "", "a customer's suppression key (KID:HEX)")
	addressKey := fs.String("address-key", "", "an address's key (KID:HEX), the address_key of a log line")
	reason := fs.String("reason", "", "add: unsubscribe, hard_bounce, complaint, operator or soft_bounce (default operator); remove: why (required)")
	by := fs.String("by", env.Getenv("USER"), "who (kept in the history)")
	history := fs.Bool("history", false, "list: print the adds and removals instead of the current list")
	limit := fs.Int("limit", 100, "list: at most this many")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || !slices.Contains([]string{"list", "add", "remove"}, pos[0]) {
		return usagef("want one subcommand: list, add or remove")
	}
	sub := pos[0]
	st.changes = sub != "list"
	lc, hmacKeys, level := parseSuppression(st)
	set := 0
	for _, v := range []string{*customer, *address, *customerKey, *addressKey} {
		if v != "" {
			set++
		}
	}
	if set > 1 || (set == 0 && sub != "list") {
		return usagef("%s wants one of --customer, --address, --customer-key or --address-key", sub)
	}
	if *by == "" {
		*by = "operator"
	}
	var (
		keys    []digest.SuppressionKey
		subject digest.SuppressionSubject
	)
	switch {
	case *customer != "" || *address != "":
		kr, err := loadKeyring(hmacKeys, lc, newLogger(env, level))
		if err != nil {
			return err
		}
		if *customer != "" {
			keys, subject = kr.CustomerKeys(*customer), digest.SubjectCustomer
		} else {
			keys, subject = kr.AddressKeys(*address), digest.SubjectAddress
		}
	case *customerKey != "" || *addressKey != "":
		k, s := *customerKey, digest.SubjectCustomer
		if *addressKey != "" {
			k, s = *addressKey, digest.SubjectAddress
		}
		if _, err := digest.ParseKey(k); err != nil {
			return usagef("%v", err)
		}
		keys, subject = []digest.SuppressionKey{digest.SuppressionKey(k)}, s
	}
	var addReason digest.SuppressionReason
	switch sub {
	case "add":
		if *reason == "" {
			*reason = string(digest.ReasonOperator)
		}
		if addReason, err = digest.ParseSuppressionReason(*reason); err != nil {
			return usagef("--reason: %v", err)
		}
	case "remove":
		if strings.TrimSpace(*reason) == "" {
			return usagef("remove needs --reason: the history keeps why")
		}
	}
	store, err := openLedger(ctx, env, lc, newLogger(env, level))
	if err != nil {
		return err
	}
	defer store.Close()
	switch sub {
	case "add":
		added, err := store.Suppress(ctx, ledger.Suppression{Keys: keys, Subject: subject, Reason: addReason, Source: "operator", By: *by})
		if err != nil {
			return err
		}
		if !added {
			fmt.Fprintf(env.Stdout, "%s %s was already suppressed: nothing changed\n", subject, keys[0])
			return nil
		}
		fmt.Fprintf(env.Stdout, "suppressed %s %s (%s): no run sends to it\n", subject, keys[0], addReason)
		return nil
	case "remove":
		n, err := store.Unsuppress(ctx, keys, ledger.Action{By: *by, Reason: *reason})
		if err != nil {
			return err
		}
		if n == 0 {
			return &exitError{code: ExitFailure, err: fmt.Errorf("%s %s is not suppressed: nothing removed", subject, keys[0])}
		}
		fmt.Fprintf(env.Stdout, "removed the suppression of %s %s: the next run sends to it\n", subject, keys[0])
		return nil
	}
	if *history {
		return suppressionHistory(ctx, env, store, keys, *limit)
	}
	return suppressionList(ctx, env, store, keys, *limit)
}

func suppressionList(ctx context.Context, env *Env, store ledger.Store, keys []digest.SuppressionKey, limit int) error {
	list, err := store.ListSuppressions(ctx, ledger.SuppressionFilter{Keys: keys, Limit: limit})
	if err != nil {
		return err
	}
	if len(list) == 0 {
		fmt.Fprintln(env.Stdout, "nothing is suppressed")
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tSUBJECT\tREASON\tSOURCE\tBY\tAT")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Key(), s.Subject, s.Reason, s.Source, s.By, s.At.UTC().Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(list) == limit {
		fmt.Fprintf(env.Stdout, "truncated at --limit %d\n", limit)
	}
	return nil
}

func suppressionHistory(ctx context.Context, env *Env, store ledger.Store, keys []digest.SuppressionKey, limit int) error {
	events, err := store.SuppressionHistory(ctx, keys, limit)
	if err != nil {
		return err
	}
	if len(events) == 0 {
		fmt.Fprintln(env.Stdout, "no suppression history")
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tACTION\tKEY\tSUBJECT\tREASON\tSOURCE\tBY\tNOTE")
	for _, e := range events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.At.UTC().Format(time.RFC3339), e.Action, e.Key, e.Subject, e.Reason, e.Source, e.By, oneLine(e.Note))
	}
	return tw.Flush()
}

// parseSuppression reads suppression's settings: the ledger, the HMAC
// keyring that makes ids and addresses keys, and the log level.
func parseSuppression(st *settings) (ledgerConfig, keyConfig, slog.Level) {
	return st.ledger(), st.hmacKeys(), st.logLevel()
}
