package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/weeklydigest/digest/digest"
)

// loadKeyring reads the keyring from DIGEST_HMAC_KEYS or
// DIGEST_HMAC_KEYS_FILE. With neither set: on the embedded SQLite ledger a
// local keyring file beside the ledger is created once (with a warning);
// with a PostgreSQL ledger it is a configuration error, since a key made up
// on one pod would not match another's.
func loadKeyring(kc keyConfig, lc ledgerConfig, log *slog.Logger) (*digest.Keyring, error) {
	inline, file := kc.Inline, kc.File
	switch {
	case inline != "" && file != "":
		return nil, usagef("set DIGEST_HMAC_KEYS or DIGEST_HMAC_KEYS_FILE, not both")
	case inline != "":
		kr, err := digest.ParseKeyring(inline)
		if err != nil {
			return nil, usagef("DIGEST_HMAC_KEYS: %v", err)
		}
		return kr, nil
	case file != "":
		kr, err := digest.ReadKeyringFile(file)
		if err != nil {
			return nil, usagef("DIGEST_HMAC_KEYS_FILE: %v", err)
		}
		return kr, nil
	case lc.DatabaseURL != "":
		return nil, usagef("no HMAC keyring: set DIGEST_HMAC_KEYS_FILE (or DIGEST_HMAC_KEYS) to kid:base64secret; make a secret with: head -c 32 /dev/urandom | base64")
	}
	return localKeyring(lc.LedgerPath+".keys", log)
}

// localKeyring reads, or creates once, the embedded default's keyring file.
func localKeyring(path string, log *slog.Logger) (*digest.Keyring, error) {
	kr, err := digest.ReadKeyringFile(path)
	if err == nil {
		return kr, nil
	}
	if _, statErr := os.Stat(path); !errors.Is(statErr, fs.ErrNotExist) {
		return nil, usagef("local keyring: %v", err)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("local keyring: %w", err)
	}
	line := "local1:" + base64.StdEncoding.EncodeToString(secret) + "\n"
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return digest.ReadKeyringFile(path) // another process made it first
	}
	if err != nil {
		return nil, fmt.Errorf("local keyring: %w", err)
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return nil, fmt.Errorf("local keyring: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("local keyring: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("local keyring: %w", err)
	}
	log.Warn("no HMAC keyring configured: created a local one for the embedded ledger; keep it with the ledger file, and set DIGEST_HMAC_KEYS_FILE in production", "path", path)
	return digest.ReadKeyringFile(path)
}
