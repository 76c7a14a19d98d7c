package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/sender"
)

// openLedger opens the ledger the settings name and migrates it when it is
// the embedded SQLite file (PostgreSQL is migrated by "digest migrate", a
// separate step with its own grants).
func openLedger(ctx context.Context, st *settings, log *slog.Logger) (ledger.Store, error) {
	cfg := ledger.Config{DatabaseURL: st.str("DIGEST_DATABASE_URL"), Path: st.str("DIGEST_LEDGER_PATH"), Logger: log}
	if err := checkDatabaseURL(cfg.DatabaseURL); err != nil {
		return nil, err
	}
	store, err := ledger.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	if cfg.DatabaseURL == "" {
		if err := store.Migrate(ctx); err != nil {
			store.Close()
			return nil, fmt.Errorf("migrate embedded ledger: %w", err)
		}
	}
	return store, nil
}

// checkDatabaseURL refuses a DIGEST_DATABASE_URL that can never connect
// (another database's scheme, or one PostgreSQL cannot parse) as a
// configuration error, exit 2: a Job retries exit 1, and no retry fixes
// this. The URL itself is not repeated: it may hold a password.
func checkDatabaseURL(raw string) error {
	if raw == "" {
		return nil
	}
	if scheme, _, ok := strings.Cut(raw, "://"); ok && scheme != "postgres" && scheme != "postgresql" {
		if len(scheme) > 20 || strings.ContainsAny(scheme, "@:/ ") {
			scheme = "?"
		}
		return usagef("DIGEST_DATABASE_URL: scheme %q is not supported; want postgres://user@host:5432/db (unset: the embedded SQLite ledger)", scheme)
	}
	if _, err := pgxpool.ParseConfig(raw); err != nil {
		return usagef("DIGEST_DATABASE_URL: not a PostgreSQL URL or connection string; want postgres://user@host:5432/db?sslmode=verify-full")
	}
	return nil
}

func fromAddress(st *settings) (digest.Address, error) {
	a, err := mail.ParseAddress(st.str("DIGEST_FROM"))
	if err != nil {
		return digest.Address{}, usagef("DIGEST_FROM=%q: want an address such as \"Account digest <digest@example.com>\"", st.str("DIGEST_FROM"))
	}
	return digest.Address{Name: a.Name, Email: a.Address}, nil
}

// openMailer returns the SMTP mailer, or the file outbox when no SMTP URL
// is set, and the look-up to use for maybe-sent digests. With a PostgreSQL
// ledger the outbox must be named on purpose: by default it would record a
// production week as sent into files nobody reads.
func openMailer(st *settings, concurrency int, log *slog.Logger) (digest.Mailer, digest.Lookup, error) {
	if st.str("DIGEST_SMTP_URL") == "" && st.str("DIGEST_DATABASE_URL") != "" && !st.explicit("DIGEST_OUTBOX_DIR") {
		return nil, nil, usagef("no mailer: a PostgreSQL ledger needs DIGEST_SMTP_URL, or an outbox directory named on purpose (DIGEST_OUTBOX_DIR or --outbox-dir) to write the digests to files instead")
	}
	from, err := fromAddress(st)
	if err != nil {
		return nil, nil, err
	}
	lookup, err := openLookup(st)
	if err != nil {
		return nil, nil, err
	}
	raw := st.str("DIGEST_SMTP_URL")
	if raw == "" {
		ob, err := sender.NewOutbox(sender.OutboxConfig{Dir: st.str("DIGEST_OUTBOX_DIR"), From: from, ListUnsubscribe: st.str("DIGEST_LIST_UNSUBSCRIBE")})
		if err != nil {
			return nil, nil, usagef("%v", err)
		}
		if lookup == nil {
			lookup = ob
		}
		return ob, lookup, nil
	}
	smtp, err := sender.ParseSMTPURL(raw)
	if err != nil {
		return nil, nil, usagef("DIGEST_SMTP_URL: %v", err)
	}
	var password string
	if f := st.str("DIGEST_SMTP_PASSWORD_FILE"); f != "" {
		if password, err = sender.ReadSecretFile(f); err != nil {
			return nil, nil, usagef("DIGEST_SMTP_PASSWORD_FILE: %v", err)
		}
	}
	rate, err := st.positiveFloat("DIGEST_RATE")
	if err != nil {
		return nil, nil, err
	}
	burst, err := st.positiveInt("DIGEST_BURST", 100000)
	if err != nil {
		return nil, nil, err
	}
	limiter, err := sender.NewLimiter(rate, burst)
	if err != nil {
		return nil, nil, usagef("%v", err)
	}
	timeout, err := st.duration("DIGEST_SMTP_TIMEOUT")
	if err != nil {
		return nil, nil, err
	}
	m, err := sender.NewSMTPMailer(sender.MailerConfig{
		SMTP: smtp, Password: password, From: from, ListUnsubscribe: st.str("DIGEST_LIST_UNSUBSCRIBE"),
		Concurrency: concurrency, Timeout: timeout, Limiter: limiter, Logger: log,
	})
	if err != nil {
		return nil, nil, usagef("%v", err)
	}
	return m, lookup, nil
}

func openLookup(st *settings) (digest.Lookup, error) {
	token := st.str("DIGEST_POSTMARK_TOKEN")
	if f := st.str("DIGEST_POSTMARK_TOKEN_FILE"); f != "" {
		t, err := sender.ReadSecretFile(f)
		if err != nil {
			return nil, usagef("DIGEST_POSTMARK_TOKEN_FILE: %v", err)
		}
		token = t
	}
	l, err := sender.ParseLookupURL(st.str("DIGEST_LOOKUP_URL"), sender.LookupConfig{PostmarkToken: token})
	if err != nil {
		return nil, usagef("DIGEST_LOOKUP_URL: %v", err)
	}
	return l, nil
}

// newRunID names this run in the ledger's history: the pod (host) name and
// a random suffix. It is transport identity only; no key depends on it.
func newRunID() string {
	host, _ := os.Hostname()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	if host == "" {
		host = "digest"
	}
	return host + "-" + hex.EncodeToString(b)
}

// isUsage reports whether err is a configuration problem (exit 2).
func isUsage(err error) bool {
	var ue *usageError
	return errors.As(err, &ue) || errors.Is(err, digest.ErrConfig)
}
