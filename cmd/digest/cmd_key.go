package main

import (
	"context"
	"fmt"
	"log/slog"
	"text/tabwriter"

	"github.com/weeklydigest/digest/digest"
)

const keyHelp = `Usage: digest key --customer ID --week YYYY-Www [--type T] [--version V]
       digest key --address EMAIL

Prints the ledger key (KID:HEX) of one customer's digest: the HMAC of
customer|week|type|version under the current key of the keyring. The ledger
stores only this key, never the customer id; support staff use it to find a
receipt ("digest review show KEY"). With --all, prints the key under every
key id of the keyring, current first (a receipt made before a rotation is
stored under an older one), for DIGEST_VERSION and then for every other
content version of DIGEST_TYPE the week was run as (read from the ledger's
pins: a resend as a new version leaves a receipt of each), one line each:
KEY, the version, and the receipt's state or "no receipt".

With --address, prints the key of an email address (KID:HEX, the HMAC of
"address|" and the address in lower case): the address_key a permanent
rejection is logged with, to match against your customers' addresses.

Examples:
  digest key --customer customer_8421 --week 2026-W32
  DIGEST_HMAC_KEYS_FILE=/secrets/hmac-keys digest key --customer c_1 --week 2026-W48 --all
  digest key --address zoe.mueller@example.com
`

func cmdKey(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "key", keyHelp)
	st := register(fs, env, "key")
	customer := fs.String("customer", "", "customer id (required)")
	week := fs.String("week", "", "ISO week YYYY-Www (required)")
	all := fs.Bool("all", false, "print the key under every key id, current first")
	address := fs.String("address", "", "print the key of this email address instead (the address_key of a permanent rejection)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	ks := parseKey(st)
	lc, keys, level, typ, version := ks.ledger, ks.keys, ks.level, ks.typ, ks.version
	if *address != "" {
		kr, err := loadKeyring(keys, lc, newLogger(env, level))
		if err != nil {
			return err
		}
		fmt.Fprintln(env.Stdout, kr.AddressKey(*address))
		return nil
	}
	if *customer == "" || *week == "" {
		return usagef("--customer and --week are required")
	}
	w, err := digest.ParseISOWeek(*week)
	if err != nil {
		return usagef("--week: %v", err)
	}
	id := digest.Identity{Customer: *customer, Week: w, Type: typ, Version: version}
	if err := id.Validate(); err != nil {
		return usagef("%v", err)
	}
	kr, err := loadKeyring(keys, lc, newLogger(env, level))
	if err != nil {
		return err
	}
	if !*all {
		fmt.Fprintln(env.Stdout, kr.Key(id))
		return nil
	}
	return keyAll(ctx, env, ks, kr, id)
}

// keyAll prints id's keys under every key id, for its version and every
// other version of its type pinned for its week, with each receipt's state.
func keyAll(ctx context.Context, env *Env, ks keySettings, kr *digest.Keyring, id digest.Identity) error {
	store, err := openLedger(ctx, env, ks.ledger, newLogger(env, ks.level))
	if err != nil {
		return err
	}
	defer store.Close()
	versions, err := weekVersions(ctx, store, id.Week, id.Type, id.Version)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	for _, v := range versions {
		vid := id
		vid.Version = v
		cands := kr.Candidates(vid)
		states, err := store.WeekStates(ctx, id.Week, cands)
		if err != nil {
			return err
		}
		for _, k := range cands {
			state := "no receipt"
			if s, ok := states[k]; ok {
				state = string(s)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", k, v, state)
		}
	}
	return tw.Flush()
}

// keySettings are the settings of "digest key": the keyring and the
// digest type and version of the key.
type keySettings struct {
	ledger       ledgerConfig // the embedded ledger's keyring file, without DIGEST_HMAC_KEYS
	keys         keyConfig
	level        slog.Level
	typ, version string
}

func parseKey(st *settings) keySettings {
	return keySettings{ledger: st.ledger(), keys: st.hmacKeys(), level: st.logLevel(), typ: st.get("DIGEST_TYPE"), version: st.get("DIGEST_VERSION")}
}
