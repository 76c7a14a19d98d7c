package main

import (
	"context"
	"fmt"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/unsubscribe"
)

const unsubscribeHelp = `Usage: digest unsubscribe-token CUSTOMER_ID
       digest unsubscribe-token --verify TOKEN

Makes the one-click unsubscribe token of a customer (and, with
DIGEST_UNSUBSCRIBE_URL set, the URL a digest carries in List-Unsubscribe),
or checks a token and prints the customer id it names. The token is the
customer id encrypted and authenticated (AES-256-GCM with a nonce derived
from the id) under DIGEST_UNSUBSCRIBE_KEYS, a keyring of its own in the
HMAC keyring's format: the URL never shows the customer id, a changed
token is refused, and tokens made under an older key verify while that
key is still in the ring. The web endpoint behind the URL does the same
with the Go package github.com/weeklydigest/digest/unsubscribe.

Exit codes: 0 made, or valid (the customer id on stdout); 1 the token is
not valid; 2 usage or configuration error.

Examples:
  DIGEST_UNSUBSCRIBE_KEYS_FILE=/secrets/unsubscribe-keys digest unsubscribe-token cust_0001
  DIGEST_UNSUBSCRIBE_KEYS_FILE=/secrets/unsubscribe-keys digest unsubscribe-token --verify u1~3q2-...
`

func cmdUnsubscribeToken(_ context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "unsubscribe-token", unsubscribeHelp)
	st := register(fs, env, "unsubscribe-token")
	verify := fs.String("verify", "", "check TOKEN and print the customer id it names")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if (*verify == "") == (len(pos) != 1) || len(pos) > 1 {
		return usagef("want one CUSTOMER_ID, or --verify TOKEN")
	}
	uc, kc, ledgerPath := parseUnsubscribeToken(st)
	ring, err := loadUnsubscribeKeys(uc)
	if err != nil {
		return err
	}
	if ring == nil {
		return usagef("no unsubscribe keyring: set DIGEST_UNSUBSCRIBE_KEYS_FILE (or DIGEST_UNSUBSCRIBE_KEYS) to kid:base64secret; make a secret with: head -c 32 /dev/urandom | base64")
	}
	// The run's refusal, here too: a token keyring that shares a secret
	// with the ledger's would let whoever holds one derive the other's
	// uses.
	ledgerKeys, err := configuredKeyring(kc, ledgerPath)
	if err != nil {
		return err
	}
	if ledgerKeys != nil && sharesSecret(ring, ledgerKeys) {
		return errSharedSecret
	}
	kr, err := unsubscribe.NewKeyring(ring)
	if err != nil {
		return err
	}
	if *verify != "" {
		id, err := kr.Verify(*verify)
		if err != nil {
			return &exitError{code: ExitFailure, err: err}
		}
		fmt.Fprintln(env.Stdout, id)
		return nil
	}
	if pos[0] == "" || len(pos[0]) > digest.MaxFieldLen {
		return usagef("CUSTOMER_ID: want 1 to %d bytes", digest.MaxFieldLen)
	}
	tok := kr.Token(pos[0])
	fmt.Fprintln(env.Stdout, tok)
	if raw := uc.URL; raw != "" {
		tpl, err := unsubscribe.ParseTemplate(raw)
		if err != nil {
			return usagef("DIGEST_UNSUBSCRIBE_URL: %v", err)
		}
		fmt.Fprintln(env.Stdout, tpl.Expand(tok))
	}
	return nil
}

// parseUnsubscribeToken reads the settings of "digest unsubscribe-token":
// the token keyring and template, and the HMAC keyring it must not share
// a secret with (configured, or the embedded ledger's file).
func parseUnsubscribeToken(st *settings) (unsubscribeConfig, keyConfig, string) {
	return st.unsubscribe(), st.hmacKeys(), st.get("DIGEST_LEDGER_PATH")
}

// loadUnsubscribeKeys reads DIGEST_UNSUBSCRIBE_KEYS or _FILE; nil when
// neither is set.
func loadUnsubscribeKeys(uc unsubscribeConfig) (*digest.Keyring, error) {
	inline, file := uc.Keys, uc.KeysFile
	switch {
	case inline != "" && file != "":
		return nil, usagef("set DIGEST_UNSUBSCRIBE_KEYS or DIGEST_UNSUBSCRIBE_KEYS_FILE, not both")
	case inline != "":
		kr, err := digest.ParseKeyring(inline)
		if err != nil {
			return nil, usagef("DIGEST_UNSUBSCRIBE_KEYS: %v", err)
		}
		return kr, nil
	case file != "":
		kr, err := digest.ReadKeyringFile(file)
		if err != nil {
			return nil, usagef("DIGEST_UNSUBSCRIBE_KEYS_FILE: %v", err)
		}
		return kr, nil
	}
	return nil, nil
}

// loadUnsubscribe returns the per-recipient unsubscribe URI of a customer,
// or nil when DIGEST_UNSUBSCRIBE_URL is unset. A bad template, a missing
// keyring, or a keyring sharing a secret with the ledger's is a usage error.
func loadUnsubscribe(uc unsubscribeConfig, ledgerKeys *digest.Keyring) (func(customerID string) string, error) {
	raw := uc.URL
	if raw == "" {
		return nil, nil
	}
	tpl, err := unsubscribe.ParseTemplate(raw)
	if err != nil {
		return nil, usagef("DIGEST_UNSUBSCRIBE_URL: %v", err)
	}
	ring, err := loadUnsubscribeKeys(uc)
	if err != nil {
		return nil, err
	}
	if ring == nil {
		return nil, usagef("DIGEST_UNSUBSCRIBE_URL is set but no unsubscribe keyring: set DIGEST_UNSUBSCRIBE_KEYS_FILE (or DIGEST_UNSUBSCRIBE_KEYS)")
	}
	if sharesSecret(ring, ledgerKeys) {
		return nil, errSharedSecret
	}
	kr, err := unsubscribe.NewKeyring(ring)
	if err != nil {
		return nil, err
	}
	return func(customerID string) string { return tpl.Expand(kr.Token(customerID)) }, nil
}

// errSharedSecret refuses an unsubscribe keyring that shares a secret with
// the HMAC keyring, in every command that reads it.
var errSharedSecret = usagef("the unsubscribe keyring shares a secret with the HMAC keyring: give it its own (head -c 32 /dev/urandom | base64)")

// configuredKeyring returns the HMAC keyring the settings name, or the
// embedded ledger's keyring file when it exists, without creating one (as
// loadKeyring would); nil when there is none.
func configuredKeyring(kc keyConfig, ledgerPath string) (*digest.Keyring, error) {
	if kc.Inline != "" || kc.File != "" {
		return loadKeyring(kc, ledgerConfig{LedgerPath: ledgerPath}, nil)
	}
	kr, err := digest.ReadKeyringFile(ledgerPath + ".keys")
	if err != nil {
		return nil, nil // none yet, or unreadable: the run will say
	}
	return kr, nil
}

// sharesSecret compares values derived from both keyrings, never secrets.
func sharesSecret(a, b *digest.Keyring) bool {
	const probe = "digest: shared-secret check"
	for _, x := range a.Derive(probe) {
		for _, y := range b.Derive(probe) {
			if string(x.Key) == string(y.Key) {
				return true
			}
		}
	}
	return false
}
