package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/redact"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/postgres"
	"github.com/weeklydigest/digest/ledger/sqlite"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/sender"
	"github.com/weeklydigest/digest/sender/events"
	"github.com/weeklydigest/digest/sender/lookupurl"
	"github.com/weeklydigest/digest/sender/outbox"
	"github.com/weeklydigest/digest/sender/smtp"
)

// openLedger opens the ledger the settings name and migrates it when it is
// the embedded SQLite file (PostgreSQL is migrated by "digest migrate", a
// separate step with its own grants). The times the store returns (a
// lease's end, a retry's due time) are on the command's clock (Env.Now),
// the clock a run schedules its passes by (ledger.CallTimes).
func openLedger(ctx context.Context, env *Env, lc ledgerConfig, log *slog.Logger) (*ledgerDB, error) {
	if err := checkDatabaseURL(lc.DatabaseURL); err != nil {
		return nil, err
	}
	store, err := openStore(ctx, lc, log, env.Now)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	if lc.DatabaseURL == "" {
		if err := store.Migrate(ctx); err != nil {
			store.Close()
			return nil, fmt.Errorf("migrate embedded ledger: %w", err)
		}
	}
	if err := checkSchema(ctx, lc, store, log); err != nil {
		store.Close()
		return nil, err
	}
	return store, nil
}

// checkSchema refuses, in words, a ledger schema this binary cannot use:
// one behind it, which lacks tables or columns it needs (exit 1: "digest
// migrate" is a separate step that may be running, and the Job's retry
// succeeds after it). A schema ahead of it, with migrations a newer binary
// applied, is refused too by a command that sends or changes the ledger
// (lc.changes; exit 2: a retry of the same binary cannot help), unless
// --allow-newer-schema: this binary does not know what the newer
// migrations changed (a table it never writes, a constraint its
// statements break). A command that only reads warns and goes on.
func checkSchema(ctx context.Context, lc ledgerConfig, store ledger.Store, log *slog.Logger) error {
	sc, err := store.Schema(ctx)
	switch {
	case errors.Is(err, ledger.ErrSchemaUnreadable):
		log.Warn("ledger schema version not checked", "err", err)
		return nil
	case err != nil:
		return fmt.Errorf("open ledger: %w", err)
	}
	switch err := sc.Err(); {
	case errors.Is(err, ledger.ErrSchemaAhead) && lc.changes && (lc.allowNewer == nil || !*lc.allowNewer):
		return &exitError{code: ExitUsage, err: fmt.Errorf("%w; or, knowing this binary does not know those migrations, pass --allow-newer-schema", err)}
	case errors.Is(err, ledger.ErrSchemaAhead):
		log.Warn("ledger schema ahead of this binary", "err", err)
	case err != nil:
		return err
	}
	return nil
}

// ledgerDB is a ledger a command opened and, on PostgreSQL, the pool the
// command built for it: the command owns the pool, shares it with the
// snapshot source (openSource), and closes it with the ledger.
type ledgerDB struct {
	ledger.Store
	pool *pgxpool.Pool // nil: the embedded SQLite ledger
}

// Close closes the store, then its pool.
func (l *ledgerDB) Close() error {
	err := l.Store.Close()
	if l.pool != nil {
		l.pool.Close()
	}
	return err
}

// sharedPool is the ledger's PostgreSQL pool, or nil when l is nil (no
// ledger opened) or the embedded SQLite ledger.
func (l *ledgerDB) sharedPool() *pgxpool.Pool {
	if l == nil {
		return nil
	}
	return l.pool
}

// openStore opens PostgreSQL on a pool of its own when lc.DatabaseURL is
// set, else the SQLite file lc.LedgerPath, with now as the store's clock
// (nil: time.Now). It does not migrate.
func openStore(ctx context.Context, lc ledgerConfig, log *slog.Logger, now func() time.Time) (*ledgerDB, error) {
	if lc.DatabaseURL != "" {
		pool, err := postgres.NewPool(ctx, lc.DatabaseURL)
		if err != nil {
			return nil, err
		}
		return &ledgerDB{Store: postgres.New(pool, postgres.Config{Now: now, Logger: log}), pool: pool}, nil
	}
	s, err := sqlite.Open(ctx, sqlite.Config{Path: lc.LedgerPath, Now: now, Logger: log})
	if err != nil {
		return nil, err
	}
	return &ledgerDB{Store: s}, nil
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
	v := st.get("DIGEST_FROM")
	a, err := mail.ParseAddress(v)
	if err != nil {
		return digest.Address{}, usagef("DIGEST_FROM=%q: want an address such as \"Account digest <digest@example.com>\"", v)
	}
	return digest.Address{Name: a.Name, Email: a.Address}, nil
}

// mailerSettings are the mailer settings read and validated without opening
// anything: every mode reads them, so that a dry run refuses what the real
// run would refuse.
type mailerSettings struct {
	lookup    digest.Lookup
	lookupURL string       // DIGEST_LOOKUP_URL redacted (redact.URL), for the log
	rate      float64      // DIGEST_RATE, messages per second
	smtp      *smtp.Config // nil: the file outbox
	outbox    outbox.Config
	// outboxNamed: DIGEST_OUTBOX_DIR was set on purpose, not defaulted.
	outboxNamed bool
}

// readMailer reads every mailer setting given, whichever mailer they
// select: a rate that is not a number is an error with the outbox too.
// Both mailers date their messages by env's clock.
func readMailer(env *Env, st *settings, concurrency int, log *slog.Logger) (mailerSettings, error) {
	var ms mailerSettings
	from, err := fromAddress(st)
	if err != nil {
		return ms, err
	}
	if ms.lookup, err = openLookup(st); err != nil {
		return ms, err
	}
	ms.lookupURL = redact.URL(st.get("DIGEST_LOOKUP_URL"))
	if ms.rate, err = st.positiveFloat("DIGEST_RATE"); err != nil {
		return ms, err
	}
	burst, err := st.positiveInt("DIGEST_BURST", 100000)
	if err != nil {
		return ms, err
	}
	limiter, err := smtp.NewLimiter(ms.rate, burst)
	if err != nil {
		return ms, usagef("%v", err)
	}
	var password string
	if f := st.get("DIGEST_SMTP_PASSWORD_FILE"); f != "" {
		if password, err = smtp.ReadSecretFile(f); err != nil {
			return ms, usagef("DIGEST_SMTP_PASSWORD_FILE: %v", err)
		}
	}
	listUnsubscribe := st.get("DIGEST_LIST_UNSUBSCRIBE")
	ms.outbox = outbox.Config{Dir: st.get("DIGEST_OUTBOX_DIR"), From: from, ListUnsubscribe: listUnsubscribe, Now: env.Now}
	ms.outboxNamed = st.explicit("DIGEST_OUTBOX_DIR")
	raw := st.get("DIGEST_SMTP_URL")
	if raw == "" {
		return ms, nil
	}
	smtpURL, err := smtp.ParseSMTPURL(raw)
	if err != nil {
		return ms, usagef("DIGEST_SMTP_URL: %v", err)
	}
	timeout, err := st.duration("DIGEST_SMTP_TIMEOUT")
	if err != nil {
		return ms, err
	}
	ms.smtp = &smtp.Config{
		SMTP: smtpURL, Password: password, From: from, ListUnsubscribe: listUnsubscribe,
		Concurrency: concurrency, Timeout: timeout, Limiter: limiter, Logger: log, Now: env.Now,
	}
	// Builds and drops a client: go-mail validates its options here.
	m, err := smtp.NewMailer(*ms.smtp)
	if err != nil {
		return ms, usagef("%v", err)
	}
	_ = m.Close()
	return ms, nil
}

// String describes the mailer and look-up for the log, without secrets.
func (ms mailerSettings) String() string {
	s := "outbox " + ms.outbox.Dir
	if ms.smtp != nil {
		s = "smtp " + ms.smtp.SMTP.String()
	}
	if ms.lookupURL != "" {
		s += ", look-up " + ms.lookupURL
	}
	return s
}

// openMailer returns the SMTP mailer, or the file outbox when no SMTP URL
// is set, and the look-up to use for maybe-sent digests. With a PostgreSQL
// ledger the outbox must be named on purpose: by default it would record a
// production week as sent into files nobody reads.
func openMailer(lc ledgerConfig, ms mailerSettings) (digest.Mailer, digest.Lookup, error) {
	if err := noMailer(lc, ms); err != nil {
		return nil, nil, err
	}
	if ms.smtp == nil {
		ob, err := outbox.New(ms.outbox)
		if err != nil {
			return nil, nil, usagef("%v", err)
		}
		if ms.lookup == nil {
			return ob, ob, nil
		}
		return ob, ms.lookup, nil
	}
	m, err := smtp.NewMailer(*ms.smtp)
	if err != nil {
		return nil, nil, usagef("%v", err)
	}
	return m, ms.lookup, nil
}

// noMailer refuses the default outbox with a PostgreSQL ledger.
func noMailer(lc ledgerConfig, ms mailerSettings) error {
	if ms.smtp == nil && lc.DatabaseURL != "" && !ms.outboxNamed {
		return usagef("no mailer: a PostgreSQL ledger needs DIGEST_SMTP_URL, or an outbox directory named on purpose (DIGEST_OUTBOX_DIR or --outbox-dir) to write the digests to files instead")
	}
	return nil
}

// checkMailer connects to the SMTP server (EHLO, STARTTLS, AUTH, QUIT; no
// message) and asks the look-up about a key no digest has, for a dry run.
// It logs each result and returns them for the summary, with the first
// failure.
func checkMailer(ctx context.Context, lc ledgerConfig, ms mailerSettings, log *slog.Logger) ([]checkResult, error) {
	var results []checkResult
	var first error
	add := func(name string, configured bool, err error) {
		r := checkResult{name: name, result: "ok"}
		switch {
		case !configured:
			r.result = "not configured"
		case err != nil:
			r.result = "failed: " + err.Error()
			log.Error(name+" check failed: a real run could not use it", "err", err)
			if first == nil {
				first = fmt.Errorf("%s check failed: %w", name, err)
			}
		default:
			log.Info(name+" check passed", "mailer", ms.String())
		}
		results = append(results, r)
	}
	switch refusal := noMailer(lc, ms); {
	case refusal != nil:
		add("smtp", true, refusal)
	case ms.smtp != nil:
		add("smtp", true, smtp.CheckConnection(ctx, *ms.smtp))
	default:
		add("smtp", false, nil)
	}
	if ms.lookup != nil {
		add("lookup", true, sender.CheckReachable(ctx, ms.lookup))
	} else {
		add("lookup", false, nil)
	}
	return results, first
}

// checkResult is one dry-run check, for the summary.
type checkResult struct{ name, result string }

// describeLedger names the ledger for the log, without secrets.
func describeLedger(lc ledgerConfig) string {
	raw := lc.DatabaseURL
	if raw == "" {
		return "sqlite " + lc.LedgerPath
	}
	cfg, err := pgconn.ParseConfig(raw)
	if err != nil {
		return "postgres (unparsable URL)"
	}
	return fmt.Sprintf("postgres %s/%s user=%s", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), cfg.Database, cfg.User)
}

func openLookup(st *settings) (digest.Lookup, error) {
	token := st.get("DIGEST_POSTMARK_TOKEN")
	if f := st.get("DIGEST_POSTMARK_TOKEN_FILE"); f != "" {
		t, err := smtp.ReadSecretFile(f)
		if err != nil {
			return nil, usagef("DIGEST_POSTMARK_TOKEN_FILE: %v", err)
		}
		token = t
	}
	cfg := lookupurl.Config{PostmarkToken: token}
	raw := st.get("DIGEST_LOOKUP_URL")
	if strings.HasPrefix(raw, events.Scheme+":") {
		lag, err := st.duration("DIGEST_EVENTS_LAG")
		if err != nil {
			return nil, err
		}
		cfg.EventsLag = lag
	}
	l, err := lookupurl.Parse(raw, cfg)
	if err != nil {
		return nil, usagef("DIGEST_LOOKUP_URL: %v", err)
	}
	return l, nil
}

// bindLookup gives the events look-up (DIGEST_LOOKUP_URL=events:…) the
// ledger it reads, once the command has opened it; other look-ups ask
// their provider and need none.
func bindLookup(l digest.Lookup, store ledger.ProviderEvents) {
	if ev, ok := l.(*events.Lookup); ok {
		ev.Bind(store)
	}
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
	return errors.As(err, &ue) || errors.Is(err, run.ErrConfig)
}
