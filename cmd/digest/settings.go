package main

import (
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
)

// setting is one configuration value: an environment variable and the flag
// that overrides it.
type setting struct {
	env  string
	flag string // "": deliberately no flag, a secret (the help says "env only")
	def  string
	help string
}

var settingsTable = []setting{
	{"DIGEST_DATABASE_URL", "database-url", "", "PostgreSQL URL of the ledger (and of the source tables); unset: embedded SQLite ledger"},
	{"DIGEST_LEDGER_PATH", "ledger-path", "./digest.db", "SQLite ledger file, when DIGEST_DATABASE_URL is unset"},
	{"DIGEST_SMTP_URL", "smtp-url", "", "smtp://[user@]host[:port]?tls=mandatory|opportunistic|none|implicit&auth=plain|login|cram-md5|xoauth2; unset: file outbox (with a PostgreSQL ledger only if DIGEST_OUTBOX_DIR is set)"},
	{"DIGEST_SMTP_PASSWORD_FILE", "smtp-password-file", "", "file holding the SMTP password (instead of a password in the URL)"},
	{"DIGEST_OUTBOX_DIR", "outbox-dir", "./outbox", "directory of the file outbox, when DIGEST_SMTP_URL is unset; with a PostgreSQL ledger it must be set on purpose"},
	{"DIGEST_LOOKUP_URL", "lookup-url", "", "provider look-up for maybe-sent digests: mailpit+http://host:8025, postmark+https://api.postmarkapp.com (token in DIGEST_POSTMARK_TOKEN_FILE) or events:PROVIDER (the provider's webhook events in the ledger, recorded by \"digest serve\"); the outbox looks itself up"},
	{"DIGEST_EVENTS_LAG", "events-lag", "30h", "with DIGEST_LOOKUP_URL=events:PROVIDER: how far behind the newest event of the provider its events are taken to be complete (webhook retries arrive late); a send counts as not found only once the newest event is this long past it"},
	{"DIGEST_POSTMARK_TOKEN", "", "", "Postmark server token for the look-up (env only: a secret never goes on a command line; better DIGEST_POSTMARK_TOKEN_FILE)"},
	{"DIGEST_POSTMARK_TOKEN_FILE", "postmark-token-file", "", "file holding the Postmark server token for the look-up"},
	{"DIGEST_HMAC_KEYS", "", "", "HMAC keyring kid:base64secret[,kid:base64secret...], current first (env only: a secret never goes on a command line; better DIGEST_HMAC_KEYS_FILE)"},
	{"DIGEST_HMAC_KEYS_FILE", "hmac-keys-file", "", "file holding the HMAC keyring, same format (e.g. a mounted Secret)"},
	{"DIGEST_FROM", "from", "Account digest <digest@localhost>", "From address of the digests"},
	{"DIGEST_LIST_UNSUBSCRIBE", "list-unsubscribe", "", "a fixed List-Unsubscribe entry for every message (after the recipient's own DIGEST_UNSUBSCRIBE_URL), e.g. <mailto:unsubscribe@example.com>"},
	{"DIGEST_UNSUBSCRIBE_URL", "unsubscribe-url", "", "per-recipient one-click unsubscribe URL (RFC 8058), https://host/path/{token} or mailto:...{token}; needs DIGEST_UNSUBSCRIBE_KEYS_FILE"},
	{"DIGEST_UNSUBSCRIBE_KEYS", "", "", "unsubscribe-token keyring kid:base64secret[,...], current first: its own secrets, never the HMAC keys (env only: a secret never goes on a command line; better DIGEST_UNSUBSCRIBE_KEYS_FILE)"},
	{"DIGEST_UNSUBSCRIBE_KEYS_FILE", "unsubscribe-keys-file", "", "file holding the unsubscribe-token keyring, same format"},
	{"DIGEST_RATE", "rate", "50", "messages per second, for the whole process"},
	{"DIGEST_BURST", "burst", "10", "messages the rate limiter lets through at once"},
	{"DIGEST_CONCURRENCY", "concurrency", "4", "parallel sends (and SMTP connections)"},
	{"DIGEST_SMTP_TIMEOUT", "smtp-timeout", "8s", "bound on an SMTP dial and, separately, on one message's exchange: a send may take twice it, and the lease must be at least four times it"},
	{"DIGEST_LEASE", "lease", "45s", "how long a claim is exclusive, renewed while the run holds it: a crashed run's claims are taken over this long after the crash (1s to 24h, at least 4 x DIGEST_SMTP_TIMEOUT)"},
	{"DIGEST_REPLAY_HORIZON", "replay-horizon", "90d", "how long after its last run a week may be replayed: prune refuses a shorter --older-than; at least 14d"},
	{"DIGEST_EVENTS_RETENTION", "events-retention", "90d", "how long prune keeps a provider event after it was received; an event naming a receipt still in the ledger goes with that receipt, each provider's newest stays (the events look-up reads them); at least 14d and DIGEST_EVENTS_LAG"},
	{"DIGEST_SOFT_BOUNCE_RETENTION", "soft-bounce-retention", "90d", "how long prune keeps an address's soft-bounce count of a week after its last bounce there; the weeks a streak still under way reaches back to (DIGEST_SOFT_BOUNCE_WEEKS) stay; at least 14d"},
	{"DIGEST_TZ", "tz", "UTC", "time zone of the ISO weeks (Area/City or UTC, not Local); a week is pinned to the zone of its first run"},
	{"DIGEST_SETTLE", "settle", "4h", "how long after a week's end (in DIGEST_TZ) its cutoff lies: activity recorded up to then is in the week's digests (rows are recorded after they occur: settlements, nightly imports). A run that sends refuses a week before it unless --early-cutoff; keep it below the schedule's offset from the week's end (the CronJob runs Monday 06:00)"},
	{"DIGEST_TYPE", "type", "weekly_activity", "digest type (part of the business key)"},
	{"DIGEST_VERSION", "version", "v1", "content version (part of the business key): a new version is a new digest; a run of a week already sent under another version is refused unless --resend-as-new-version (--content-version: its old, deprecated name)"},
	{"DIGEST_LOG_LEVEL", "log-level", "info", "debug, info, warn or error"},
	{"DIGEST_PUSHGATEWAY_URL", "pushgateway-url", "", "Prometheus Pushgateway to push run, prune and verify metrics and the week's state (job digest_week) to at the end, e.g. http://pushgateway:9091; unset: no push"},
	{"DIGEST_METRICS_ADDR", "metrics-addr", ":9090", "address where \"digest schedule\" serves /metrics and /healthz"},
	{"DIGEST_LISTEN_ADDR", "listen-addr", ":8080", "address where \"digest serve\" listens: one-click unsubscribe, /healthz, /readyz, /metrics"},
	{"DIGEST_SERVE_RATE", "serve-rate", "5", "unsubscribe requests per second one client may make to \"digest serve\" (429 past it)"},
	{"DIGEST_SERVE_BURST", "serve-burst", "20", "unsubscribe requests one client may make to \"digest serve\" at once"},
	{"DIGEST_SOFT_BOUNCE_WEEKS", "soft-bounce-weeks", "3", "\"digest serve\" suppresses an address that soft-bounced in this many consecutive ISO weeks (UTC)"},
	{"DIGEST_POSTMARK_WEBHOOK_AUTH_FILE", "postmark-webhook-auth-file", "", "file holding user:password, the HTTP Basic credentials of the Postmark webhook URL: \"digest serve\" takes POST /webhooks/postmark"},
	{"DIGEST_SES_TOPICS", "ses-topics", "", "SNS topic ARNs, comma separated, whose SES events \"digest serve\" takes at POST /webhooks/ses (it confirms their subscriptions)"},
	{"DIGEST_SES_CERTIFICATES_FILE", "ses-certificates-file", "", "file of PEM SNS signing certificates to trust instead of fetching them from the SNS host"},
	{"DIGEST_SENDGRID_WEBHOOK_KEY_FILE", "sendgrid-webhook-key-file", "", "file holding the SendGrid Signed Event Webhook verification key (base64): POST /webhooks/sendgrid"},
	{"DIGEST_MAILGUN_WEBHOOK_KEY_FILE", "mailgun-webhook-key-file", "", "file holding the Mailgun HTTP webhook signing key: POST /webhooks/mailgun"},
	{"DIGEST_RESEND_WEBHOOK_SECRET_FILE", "resend-webhook-secret-file", "", "file holding the Resend (Svix) webhook signing secret, whsec_...: POST /webhooks/resend"},
	{"DIGEST_CLIENT_IP_HEADER", "client-ip-header", "", "header naming the client for \"digest serve\"'s rate limit behind a proxy (X-Forwarded-For: its last entry; X-Real-IP); unset: the peer address"},
}

// commandSettings declares the settings each command reads: its --help
// lists their flags and no other, and its parse step may read these only
// (settings.get refuses any other). TestCommandSettingsAreWhatParseReads
// keeps the declaration equal to what each parse step reads.
var commandSettings = map[string][]string{
	"run": join(ledgerSettings, hmacSettings, unsubscribeSettings, mailerSettingNames, weekSettings,
		[]string{"DIGEST_LEASE", "DIGEST_CONCURRENCY", "DIGEST_REPLAY_HORIZON", "DIGEST_LOG_LEVEL", "DIGEST_PUSHGATEWAY_URL"}),
	"migrate": join(ledgerSettings, []string{"DIGEST_LOG_LEVEL"}),
	"status":  join(ledgerSettings, hmacSettings, weekSettings, []string{"DIGEST_REPLAY_HORIZON", "DIGEST_LOG_LEVEL", "DIGEST_PUSHGATEWAY_URL"}),
	"verify": join(ledgerSettings, lookupSettings, hmacSettings, weekSettings, []string{"DIGEST_OUTBOX_DIR", "DIGEST_SMTP_URL",
		"DIGEST_LOG_LEVEL", "DIGEST_PUSHGATEWAY_URL"}),
	"review":      join(ledgerSettings, hmacSettings, lookupSettings, weekSettings, []string{"DIGEST_LOG_LEVEL", "DIGEST_PUSHGATEWAY_URL"}),
	"repin":       join(ledgerSettings, hmacSettings, weekSettings, []string{"DIGEST_LOG_LEVEL", "DIGEST_PUSHGATEWAY_URL"}),
	"suppression": join(ledgerSettings, hmacSettings, []string{"DIGEST_LOG_LEVEL"}),
	"events":      join(ledgerSettings, []string{"DIGEST_EVENTS_LAG", "DIGEST_LOG_LEVEL"}),
	"prune": join(ledgerSettings, []string{"DIGEST_REPLAY_HORIZON", "DIGEST_EVENTS_RETENTION", "DIGEST_SOFT_BOUNCE_RETENTION",
		"DIGEST_SOFT_BOUNCE_WEEKS", "DIGEST_EVENTS_LAG", "DIGEST_LOG_LEVEL", "DIGEST_PUSHGATEWAY_URL"}),
	// schedule hands its settings flags to its runs as the environment
	// (withFlagSettings), the week's settings included.
	"schedule": join(weekSettings, []string{"DIGEST_LOG_LEVEL", "DIGEST_METRICS_ADDR"}),
	"serve": join(ledgerSettings, hmacSettings, unsubscribeSettings, []string{"DIGEST_LOG_LEVEL",
		"DIGEST_LISTEN_ADDR", "DIGEST_SERVE_RATE", "DIGEST_SERVE_BURST", "DIGEST_CLIENT_IP_HEADER", "DIGEST_SOFT_BOUNCE_WEEKS",
		"DIGEST_POSTMARK_WEBHOOK_AUTH_FILE", "DIGEST_SES_TOPICS", "DIGEST_SES_CERTIFICATES_FILE",
		"DIGEST_SENDGRID_WEBHOOK_KEY_FILE", "DIGEST_MAILGUN_WEBHOOK_KEY_FILE", "DIGEST_RESEND_WEBHOOK_SECRET_FILE"}),
	"preview": join(ledgerSettings, hmacSettings, unsubscribeSettings, []string{"DIGEST_TZ", "DIGEST_TYPE", "DIGEST_VERSION",
		"DIGEST_FROM", "DIGEST_LIST_UNSUBSCRIBE", "DIGEST_LOG_LEVEL"}),
	"send-test": join(ledgerSettings, hmacSettings, unsubscribeSettings, mailerSettingNames,
		[]string{"DIGEST_TZ", "DIGEST_TYPE", "DIGEST_VERSION", "DIGEST_LOG_LEVEL"}),
	"seed":              {"DIGEST_DATABASE_URL"},
	"week":              {"DIGEST_TZ"},
	"key":               join(ledgerSettings, hmacSettings, []string{"DIGEST_TYPE", "DIGEST_VERSION", "DIGEST_LOG_LEVEL"}),
	"unsubscribe-token": join(hmacSettings, unsubscribeSettings, []string{"DIGEST_LEDGER_PATH"}),
	"version":           nil,
}

// Settings that go together, for commandSettings.
var (
	ledgerSettings      = []string{"DIGEST_DATABASE_URL", "DIGEST_LEDGER_PATH"}
	hmacSettings        = []string{"DIGEST_HMAC_KEYS", "DIGEST_HMAC_KEYS_FILE"}
	unsubscribeSettings = []string{"DIGEST_UNSUBSCRIBE_URL", "DIGEST_UNSUBSCRIBE_KEYS", "DIGEST_UNSUBSCRIBE_KEYS_FILE"}
	weekSettings        = []string{"DIGEST_TZ", "DIGEST_SETTLE", "DIGEST_TYPE", "DIGEST_VERSION"}
	lookupSettings      = []string{"DIGEST_LOOKUP_URL", "DIGEST_EVENTS_LAG", "DIGEST_POSTMARK_TOKEN", "DIGEST_POSTMARK_TOKEN_FILE"}
	// mailerSettingNames: what readMailer reads.
	mailerSettingNames = join(lookupSettings, []string{"DIGEST_FROM", "DIGEST_LIST_UNSUBSCRIBE", "DIGEST_RATE", "DIGEST_BURST",
		"DIGEST_SMTP_URL", "DIGEST_SMTP_PASSWORD_FILE", "DIGEST_SMTP_TIMEOUT", "DIGEST_OUTBOX_DIR"})
)

func join(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, v := range l {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out
}

// deprecatedFlags are old names of setting flags, still accepted: new
// name by old.
var deprecatedFlags = map[string]string{"content-version": "version"}

// envHelp is the table of settings of "digest --help".
func envHelp() string {
	var b strings.Builder
	for _, s := range settingsTable {
		f := "--" + s.flag
		if s.flag == "" {
			f = "(no flag)"
		}
		def := ""
		if s.def != "" {
			def = " (default " + s.def + ")"
		}
		fmt.Fprintf(&b, "  %-28s %-23s %s%s\n", s.env, f, s.help, def)
	}
	return b.String()
}

// settings holds one command's raw settings (environment, then flag, else
// the default), by variable name, for the command's parse step.
type settings struct {
	command string
	values  map[string]*string // the declared settings only
	fromEnv map[string]bool    // set in the environment, not defaulted
	read    map[string]bool    // what the parse step read (for tests)
	fs      *flag.FlagSet

	// changes: the command sends or changes receipts or suppressions, so
	// openLedger refuses a schema with migrations this binary does not
	// know unless allowNewer (--allow-newer-schema); see changesLedger.
	changes    bool
	allowNewer *bool
}

// changesLedger marks a command that sends or changes the ledger and
// registers its --allow-newer-schema. A command that only reads (status,
// verify, preview, review list) is not marked: on a newer schema it
// warns and goes on.
func (s *settings) changesLedger() {
	s.changes = true
	s.allowNewer = s.fs.Bool("allow-newer-schema", false, "use a ledger schema with migrations this binary does not know (a newer binary migrated it) anyway; default: refuse, exit 2: deploy the newer binary, or roll the schema back with its \"digest migrate --down-to\"")
}

// register adds the flags of command's settings (commandSettings) to fs,
// defaulting to the environment. Values are read after fs.Parse.
func register(fs *flag.FlagSet, env *Env, command string) *settings {
	declared, ok := commandSettings[command]
	if !ok {
		panic("settings: no commandSettings entry for " + command)
	}
	s := &settings{command: command, values: map[string]*string{}, fromEnv: map[string]bool{}, read: map[string]bool{}, fs: fs}
	for _, st := range settingsTable {
		if !slices.Contains(declared, st.env) {
			continue
		}
		v := env.Getenv(st.env)
		s.fromEnv[st.env] = v != ""
		if v == "" {
			v = st.def
		}
		s.values[st.env] = &v
		if st.flag == "" {
			continue
		}
		sv := &settingValue{p: &v, kind: settingKind(st), url: strings.HasSuffix(st.env, "_URL")}
		fs.Var(sv, st.flag, st.help+" [$"+st.env+"]")
		for old, name := range deprecatedFlags {
			if name == st.flag {
				fs.Var(sv, old, "deprecated: the old name of --"+st.flag+" [$"+st.env+"]")
			}
		}
	}
	return s
}

// get returns the value of the setting env. It panics when the command
// does not declare it (the declaration is what its --help lists), and
// when the flags are not parsed yet: the value would ignore its flag.
func (s *settings) get(env string) string {
	if !s.fs.Parsed() {
		panic(fmt.Sprintf("settings: digest %s reads %s before parsing its flags", s.command, env))
	}
	p, ok := s.values[env]
	if !ok {
		panic(fmt.Sprintf("settings: digest %s reads %s, which commandSettings does not declare for it", s.command, env))
	}
	s.read[env] = true
	return *p
}

// row returns the row of settingsTable named env.
func row(env string) setting {
	for _, st := range settingsTable {
		if st.env == env {
			return st
		}
	}
	panic("settings: no setting " + env)
}

// byFlag reports whether the setting env was set by its flag (or its
// deprecated name), read after fs.Parse.
func (s *settings) byFlag(env string) bool {
	set := false
	s.fs.Visit(func(f *flag.Flag) {
		if f.Name == row(env).flag || deprecatedFlags[f.Name] == row(env).flag {
			set = true
		}
	})
	return set
}

// explicit reports whether the setting env was set on purpose: in the
// environment or by its flag (read after fs.Parse), not left to its
// default.
func (s *settings) explicit(env string) bool {
	s.get(env)
	return s.fromEnv[env] || s.byFlag(env)
}

func (s *settings) duration(env string) (time.Duration, error) {
	v := s.get(env)
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, usagef("%s=%q: want a positive duration such as 30s, 10m or 2h", env, v)
	}
	return d, nil
}

func (s *settings) positiveInt(env string, max int) (int, error) {
	v := s.get(env)
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, usagef("%s=%q: want a whole number from 1 to %d", env, v, max)
	}
	return n, nil
}

func (s *settings) positiveFloat(env string) (float64, error) {
	v := s.get(env)
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || f > 1e6 {
		return 0, usagef("%s=%q: want a positive number of messages per second", env, v)
	}
	return f, nil
}

func (s *settings) location() (*time.Location, error) {
	v := s.get("DIGEST_TZ")
	if v == "Local" {
		// The pod's zone is an accident of its image: another pod would
		// compute other week bounds, and so other fingerprints.
		return nil, usagef("DIGEST_TZ=Local: the machine's local zone is not a setting; name the zone, such as Europe/Berlin or UTC")
	}
	loc, err := time.LoadLocation(v)
	if err != nil {
		return nil, usagef("DIGEST_TZ=%q: not a time zone; want an IANA name such as Europe/Berlin or UTC", v)
	}
	return loc, nil
}

// logLevel reads DIGEST_LOG_LEVEL; a level it does not know is info.
func (s *settings) logLevel() slog.Level { return parseLogLevel(s.get("DIGEST_LOG_LEVEL")) }

func parseLogLevel(v string) slog.Level {
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(v))); err != nil {
		level = slog.LevelInfo
	}
	return level
}

// ledger reads where the ledger is.
func (s *settings) ledger() ledgerConfig {
	return ledgerConfig{DatabaseURL: s.get("DIGEST_DATABASE_URL"), LedgerPath: s.get("DIGEST_LEDGER_PATH"), changes: s.changes, allowNewer: s.allowNewer}
}

// hmacKeys reads where the HMAC keyring is.
func (s *settings) hmacKeys() keyConfig {
	return keyConfig{Inline: s.get("DIGEST_HMAC_KEYS"), File: s.get("DIGEST_HMAC_KEYS_FILE")}
}

// unsubscribe reads the one-click unsubscribe settings.
func (s *settings) unsubscribe() unsubscribeConfig {
	return unsubscribeConfig{URL: s.get("DIGEST_UNSUBSCRIBE_URL"), Keys: s.get("DIGEST_UNSUBSCRIBE_KEYS"), KeysFile: s.get("DIGEST_UNSUBSCRIBE_KEYS_FILE")}
}

// ledgerConfig says where the ledger is and how the command may use it.
type ledgerConfig struct {
	DatabaseURL string // "": the embedded SQLite ledger at LedgerPath
	LedgerPath  string
	changes     bool  // see settings.changes
	allowNewer  *bool // --allow-newer-schema
}

// keyConfig says where the HMAC keyring is: DIGEST_HMAC_KEYS or _FILE.
type keyConfig struct{ Inline, File string }

// unsubscribeConfig holds DIGEST_UNSUBSCRIBE_URL and its keyring's
// sources, DIGEST_UNSUBSCRIBE_KEYS or _FILE.
type unsubscribeConfig struct{ URL, Keys, KeysFile string }

// minReplayHorizon is the least DIGEST_REPLAY_HORIZON: two weeks, so that
// a week's receipts outlive its scheduled run, that run's retries and a
// backfill the week after, whatever prune is told.
const minReplayHorizon = 14 * 24 * time.Hour

// replayHorizon reads DIGEST_REPLAY_HORIZON (Go units or whole days).
func (s *settings) replayHorizon() (time.Duration, error) {
	v := s.get("DIGEST_REPLAY_HORIZON")
	d, ok := parseDays(v)
	if !ok {
		return 0, usagef("DIGEST_REPLAY_HORIZON=%q: want a duration such as 90d or 2160h", v)
	}
	if d < minReplayHorizon {
		return 0, usagef("DIGEST_REPLAY_HORIZON=%q: at least 14d (a week must stay replayable past its retries and backfills)", v)
	}
	return d, nil
}

// minEventRetention is the least DIGEST_EVENTS_RETENTION and
// DIGEST_SOFT_BOUNCE_RETENTION: two weeks, far past the days a provider
// retries a webhook, so that a retried event still finds its first copy
// (and is taken for the replay it is) and a streak its last weeks.
const minEventRetention = 14 * 24 * time.Hour

// eventRetention reads a retention of what the providers reported,
// DIGEST_EVENTS_RETENTION or DIGEST_SOFT_BOUNCE_RETENTION (Go units or
// whole days).
func (s *settings) eventRetention(env string) (time.Duration, error) {
	v := s.get(env)
	d, ok := parseDays(v)
	if !ok {
		return 0, usagef("%s=%q: want a duration such as 90d or 2160h", env, v)
	}
	if d < minEventRetention {
		return 0, usagef("%s=%q: at least 14d (a provider's retried webhook must find its event, a soft-bounce streak its weeks)", env, v)
	}
	return d, nil
}

// parseDays reads a positive Go duration or a whole number of days ("90d").
func parseDays(s string) (time.Duration, bool) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		return time.Duration(n) * 24 * time.Hour, err == nil && n > 0 && n < 100000
	}
	d, err := time.ParseDuration(s)
	return d, err == nil && d > 0
}

// days prints d in whole days when it is some, else as Go does.
func days(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}
