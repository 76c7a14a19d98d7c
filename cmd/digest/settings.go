package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// setting is one configuration value: an environment variable and the flag
// that overrides it.
type setting struct {
	env   string
	flag  string // "" when there is deliberately no flag (secrets)
	def   string
	help  string
	group string
	field func(*config) *string // where the value lives in config
}

// config holds every setting's value as given (environment, then flag,
// else the default), one field per row of settingsTable: commands read
// st.DatabaseURL, not a look-up by name, so a misspelt setting does not
// compile. Values are parsed where they are used (st.duration(&st.Lease),
// st.location()), so each command refuses exactly what it reads.
type config struct {
	DatabaseURL, LedgerPath                                 string
	SMTPURL, SMTPPasswordFile, OutboxDir                    string
	LookupURL, PostmarkToken, PostmarkTokenFile             string
	HMACKeys, HMACKeysFile                                  string
	From, ListUnsubscribe                                   string
	UnsubscribeURL, UnsubscribeKeys, UnsubscribeKeysFile    string
	Rate, Burst, Concurrency, SMTPTimeout, Lease            string
	ReplayHorizon, TZ, Type, Version, Settle                string
	LogLevel, PushgatewayURL, MetricsAddr                   string
	ListenAddr, ServeRate, ServeBurst, ClientIPHeader       string
	EventsLag, SoftBounceWeeks                              string
	PostmarkWebhookAuthFile, SESTopics, SESCertificatesFile string
	SendGridWebhookKeyFile, MailgunWebhookKeyFile           string
	ResendWebhookSecretFile                                 string
}

// The groups say which commands register a setting's flag.
const (
	gLedger = "ledger"
	gSend   = "send"
	gKeys   = "keys"
	gDigest = "digest"
	gLog    = "log"
	gPush   = "push"   // run and prune push their metrics
	gServe  = "serve"  // schedule serves its metrics
	gListen = "listen" // the HTTP service of "digest serve"
	// gRetention: run (duplicate ages), status (repeats) and prune (its
	// floor) read the replay horizon.
	gRetention = "retention"
)

var settingsTable = []setting{
	{"DIGEST_DATABASE_URL", "database-url", "", "PostgreSQL URL of the ledger (and of the source tables); unset: embedded SQLite ledger", gLedger, func(c *config) *string { return &c.DatabaseURL }},
	{"DIGEST_LEDGER_PATH", "ledger-path", "./digest.db", "SQLite ledger file, when DIGEST_DATABASE_URL is unset", gLedger, func(c *config) *string { return &c.LedgerPath }},
	{"DIGEST_SMTP_URL", "smtp-url", "", "smtp://[user@]host[:port]?tls=mandatory|opportunistic|none|implicit&auth=plain|login|cram-md5|xoauth2; unset: file outbox (with a PostgreSQL ledger only if DIGEST_OUTBOX_DIR is set)", gSend, func(c *config) *string { return &c.SMTPURL }},
	{"DIGEST_SMTP_PASSWORD_FILE", "smtp-password-file", "", "file holding the SMTP password (instead of a password in the URL)", gSend, func(c *config) *string { return &c.SMTPPasswordFile }},
	{"DIGEST_OUTBOX_DIR", "outbox-dir", "./outbox", "directory of the file outbox, when DIGEST_SMTP_URL is unset; with a PostgreSQL ledger it must be set on purpose", gSend, func(c *config) *string { return &c.OutboxDir }},
	{"DIGEST_LOOKUP_URL", "lookup-url", "", "provider look-up for maybe-sent digests: mailpit+http://host:8025, postmark+https://api.postmarkapp.com (token in DIGEST_POSTMARK_TOKEN_FILE) or events:PROVIDER (the provider's webhook events in the ledger, recorded by \"digest serve\"); the outbox looks itself up", gSend, func(c *config) *string { return &c.LookupURL }},
	{"DIGEST_EVENTS_LAG", "events-lag", "30h", "with DIGEST_LOOKUP_URL=events:PROVIDER: how far behind the newest event of the provider its events are taken to be complete (webhook retries arrive late); a send counts as not found only once the newest event is this long past it", gSend, func(c *config) *string { return &c.EventsLag }},
	{"DIGEST_POSTMARK_TOKEN", "", "", "Postmark server token for the look-up (env only)", gSend, func(c *config) *string { return &c.PostmarkToken }},
	{"DIGEST_POSTMARK_TOKEN_FILE", "postmark-token-file", "", "file holding the Postmark server token for the look-up", gSend, func(c *config) *string { return &c.PostmarkTokenFile }},
	{"DIGEST_HMAC_KEYS", "", "", "HMAC keyring kid:base64secret[,kid:base64secret...], current first (env only: never on a command line)", gKeys, func(c *config) *string { return &c.HMACKeys }},
	{"DIGEST_HMAC_KEYS_FILE", "hmac-keys-file", "", "file holding the HMAC keyring, same format (e.g. a mounted Secret)", gKeys, func(c *config) *string { return &c.HMACKeysFile }},
	{"DIGEST_FROM", "from", "Account digest <digest@localhost>", "From address of the digests", gSend, func(c *config) *string { return &c.From }},
	{"DIGEST_LIST_UNSUBSCRIBE", "list-unsubscribe", "", "a fixed List-Unsubscribe entry for every message (after the recipient's own DIGEST_UNSUBSCRIBE_URL), e.g. <mailto:unsubscribe@example.com>", gSend, func(c *config) *string { return &c.ListUnsubscribe }},
	{"DIGEST_UNSUBSCRIBE_URL", "unsubscribe-url", "", "per-recipient one-click unsubscribe URL (RFC 8058), https://host/path/{token} or mailto:...{token}; needs DIGEST_UNSUBSCRIBE_KEYS_FILE", gSend, func(c *config) *string { return &c.UnsubscribeURL }},
	{"DIGEST_UNSUBSCRIBE_KEYS", "", "", "unsubscribe-token keyring kid:base64secret[,...], current first: its own secrets, never the HMAC keys (env only)", gKeys, func(c *config) *string { return &c.UnsubscribeKeys }},
	{"DIGEST_UNSUBSCRIBE_KEYS_FILE", "unsubscribe-keys-file", "", "file holding the unsubscribe-token keyring, same format", gKeys, func(c *config) *string { return &c.UnsubscribeKeysFile }},
	{"DIGEST_RATE", "rate", "50", "messages per second, for the whole process", gSend, func(c *config) *string { return &c.Rate }},
	{"DIGEST_BURST", "burst", "10", "messages the rate limiter lets through at once", gSend, func(c *config) *string { return &c.Burst }},
	{"DIGEST_CONCURRENCY", "concurrency", "4", "parallel sends (and SMTP connections)", gSend, func(c *config) *string { return &c.Concurrency }},
	{"DIGEST_SMTP_TIMEOUT", "smtp-timeout", "8s", "bound on an SMTP dial and, separately, on one message's exchange: a send may take twice it, and the lease must be at least four times it", gSend, func(c *config) *string { return &c.SMTPTimeout }},
	{"DIGEST_LEASE", "lease", "45s", "how long a claim is exclusive, renewed while the run holds it: a crashed run's claims are taken over this long after the crash (1s to 24h, at least 4 x DIGEST_SMTP_TIMEOUT)", gSend, func(c *config) *string { return &c.Lease }},
	{"DIGEST_REPLAY_HORIZON", "replay-horizon", "90d", "how long after its last run a week may be replayed: prune refuses a shorter --older-than; at least 14d", gRetention, func(c *config) *string { return &c.ReplayHorizon }},
	{"DIGEST_TZ", "tz", "UTC", "time zone of the ISO weeks (Area/City or UTC, not Local); a week is pinned to the zone of its first run", gDigest, func(c *config) *string { return &c.TZ }},
	{"DIGEST_SETTLE", "settle", "4h", "how long after a week's end (in DIGEST_TZ) its cutoff lies: activity recorded up to then is in the week's digests (rows are recorded after they occur: settlements, nightly imports). A run that sends refuses a week before it unless --early-cutoff; keep it below the schedule's offset from the week's end (the CronJob runs Monday 06:00)", gDigest, func(c *config) *string { return &c.Settle }},
	{"DIGEST_TYPE", "type", "weekly_activity", "digest type (part of the business key)", gDigest, func(c *config) *string { return &c.Type }},
	{"DIGEST_VERSION", "content-version", "v1", "content version (part of the business key): bump it to send a week again with new content", gDigest, func(c *config) *string { return &c.Version }},
	{"DIGEST_LOG_LEVEL", "log-level", "info", "debug, info, warn or error", gLog, func(c *config) *string { return &c.LogLevel }},
	{"DIGEST_PUSHGATEWAY_URL", "pushgateway-url", "", "Prometheus Pushgateway to push run, prune and verify metrics and the week's state (job digest_week) to at the end, e.g. http://pushgateway:9091; unset: no push", gPush, func(c *config) *string { return &c.PushgatewayURL }},
	{"DIGEST_METRICS_ADDR", "metrics-addr", ":9090", "address where \"digest schedule\" serves /metrics and /healthz", gServe, func(c *config) *string { return &c.MetricsAddr }},
	{"DIGEST_LISTEN_ADDR", "listen-addr", ":8080", "address where \"digest serve\" listens: one-click unsubscribe, /healthz, /readyz, /metrics", gListen, func(c *config) *string { return &c.ListenAddr }},
	{"DIGEST_SERVE_RATE", "serve-rate", "5", "unsubscribe requests per second one client may make to \"digest serve\" (429 past it)", gListen, func(c *config) *string { return &c.ServeRate }},
	{"DIGEST_SERVE_BURST", "serve-burst", "20", "unsubscribe requests one client may make to \"digest serve\" at once", gListen, func(c *config) *string { return &c.ServeBurst }},
	{"DIGEST_SOFT_BOUNCE_WEEKS", "soft-bounce-weeks", "3", "\"digest serve\" suppresses an address that soft-bounced in this many consecutive ISO weeks (UTC)", gListen, func(c *config) *string { return &c.SoftBounceWeeks }},
	{"DIGEST_POSTMARK_WEBHOOK_AUTH_FILE", "postmark-webhook-auth-file", "", "file holding user:password, the HTTP Basic credentials of the Postmark webhook URL: \"digest serve\" takes POST /webhooks/postmark", gListen, func(c *config) *string { return &c.PostmarkWebhookAuthFile }},
	{"DIGEST_SES_TOPICS", "ses-topics", "", "SNS topic ARNs, comma separated, whose SES events \"digest serve\" takes at POST /webhooks/ses (it confirms their subscriptions)", gListen, func(c *config) *string { return &c.SESTopics }},
	{"DIGEST_SES_CERTIFICATES_FILE", "ses-certificates-file", "", "file of PEM SNS signing certificates to trust instead of fetching them from the SNS host", gListen, func(c *config) *string { return &c.SESCertificatesFile }},
	{"DIGEST_SENDGRID_WEBHOOK_KEY_FILE", "sendgrid-webhook-key-file", "", "file holding the SendGrid Signed Event Webhook verification key (base64): POST /webhooks/sendgrid", gListen, func(c *config) *string { return &c.SendGridWebhookKeyFile }},
	{"DIGEST_MAILGUN_WEBHOOK_KEY_FILE", "mailgun-webhook-key-file", "", "file holding the Mailgun HTTP webhook signing key: POST /webhooks/mailgun", gListen, func(c *config) *string { return &c.MailgunWebhookKeyFile }},
	{"DIGEST_RESEND_WEBHOOK_SECRET_FILE", "resend-webhook-secret-file", "", "file holding the Resend (Svix) webhook signing secret, whsec_...: POST /webhooks/resend", gListen, func(c *config) *string { return &c.ResendWebhookSecretFile }},
	{"DIGEST_CLIENT_IP_HEADER", "client-ip-header", "", "header naming the client for \"digest serve\"'s rate limit behind a proxy (X-Forwarded-For: its last entry; X-Real-IP); unset: the peer address", gListen, func(c *config) *string { return &c.ClientIPHeader }},
}

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

// settings holds the resolved values, read after fs.Parse.
type settings struct {
	config
	fromEnv map[string]bool // by variable name: set in the environment, not defaulted
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

// register adds the flags of the given groups to fs, defaulting to the
// environment. Values are read after fs.Parse.
func register(fs *flag.FlagSet, env *Env, groups ...string) *settings {
	s := &settings{fromEnv: map[string]bool{}, fs: fs}
	for _, st := range settingsTable {
		v := env.Getenv(st.env)
		s.fromEnv[st.env] = v != ""
		if v == "" {
			v = st.def
		}
		p := st.field(&s.config)
		*p = v
		if st.flag == "" || !hasGroup(groups, st.group) {
			continue
		}
		s.addFlag(fs, st)
	}
	return s
}

func (s *settings) addFlag(fs *flag.FlagSet, st setting) {
	fs.Var(&settingValue{p: st.field(&s.config), kind: settingKind(st)}, st.flag, st.help+" [$"+st.env+"]")
}

// flags adds the flags of the given fields only, for commands that use a
// few settings of a group and must not list the others.
func (s *settings) flags(fs *flag.FlagSet, fields ...*string) {
	for _, p := range fields {
		if st := s.setting(p); st.flag != "" {
			s.addFlag(fs, st)
		}
	}
}

// setting returns the row of settingsTable whose value p points to; p is
// always a field of s.config (TestEveryConfigFieldIsASetting).
func (s *settings) setting(p *string) setting {
	for _, st := range settingsTable {
		if st.field(&s.config) == p {
			return st
		}
	}
	panic("settings: not a field of config")
}

func hasGroup(groups []string, g string) bool {
	for _, x := range groups {
		if x == g {
			return true
		}
	}
	return false
}

// explicit reports whether the setting p points to was set on purpose: in
// the environment or by its flag (read after fs.Parse), not left to its
// default.
func (s *settings) explicit(p *string) bool {
	st := s.setting(p)
	if s.fromEnv[st.env] {
		return true
	}
	set := false
	s.fs.Visit(func(f *flag.Flag) {
		if f.Name == st.flag {
			set = true
		}
	})
	return set
}

func (s *settings) duration(p *string) (time.Duration, error) {
	env, v := s.setting(p).env, *p
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, usagef("%s=%q: want a positive duration such as 30s, 10m or 2h", env, v)
	}
	return d, nil
}

func (s *settings) positiveInt(p *string, max int) (int, error) {
	env, v := s.setting(p).env, *p
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, usagef("%s=%q: want a whole number from 1 to %d", env, v, max)
	}
	return n, nil
}

func (s *settings) positiveFloat(p *string) (float64, error) {
	env, v := s.setting(p).env, *p
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || f > 1e6 {
		return 0, usagef("%s=%q: want a positive number of messages per second", env, v)
	}
	return f, nil
}

func (s *settings) location() (*time.Location, error) {
	v := s.TZ
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

// minReplayHorizon is the least DIGEST_REPLAY_HORIZON: two weeks, so that
// a week's receipts outlive its scheduled run, that run's retries and a
// backfill the week after, whatever prune is told.
const minReplayHorizon = 14 * 24 * time.Hour

// replayHorizon reads DIGEST_REPLAY_HORIZON (Go units or whole days).
func (s *settings) replayHorizon() (time.Duration, error) {
	v := s.ReplayHorizon
	d, ok := parseDays(v)
	if !ok {
		return 0, usagef("DIGEST_REPLAY_HORIZON=%q: want a duration such as 90d or 2160h", v)
	}
	if d < minReplayHorizon {
		return 0, usagef("DIGEST_REPLAY_HORIZON=%q: at least 14d (a week must stay replayable past its retries and backfills)", v)
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
