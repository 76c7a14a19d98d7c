package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/weeklydigest/digest/digest"
)

const keyHelp = `Usage: digest key --customer ID --week YYYY-Www [--type T] [--version V]
       digest key --address EMAIL

Prints the ledger key (KID:HEX) of one customer's digest: the HMAC of
customer|week|type|version under the current key of the keyring. The ledger
stores only this key, never the customer id; support staff use it to find a
receipt ("digest review show KEY"). With --all, prints the key under every
key id of the keyring, current first (a receipt made before a rotation is
stored under an older one).

With --address, prints the key of an email address (KID:HEX, the HMAC of
"address|" and the address in lower case): the address_key a permanent
rejection is logged with, to match against your customers' addresses.

Examples:
  digest key --customer customer_8421 --week 2026-W32
  DIGEST_HMAC_KEYS_FILE=/secrets/hmac-keys digest key --customer c_1 --week 2026-W48 --all
  digest key --address zoe.mueller@example.com
`

func cmdKey(_ context.Context, env *Env, args []string) error {
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
	for _, k := range kr.Candidates(id) {
		fmt.Fprintln(env.Stdout, k)
	}
	return nil
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
