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
}

// The groups say which commands register a setting's flag.
const (
	gLedger = "ledger"
	gSend   = "send"
	gKeys   = "keys"
	gDigest = "digest"
	gLog    = "log"
	gPush   = "push"  // run and prune push their metrics
	gServe  = "serve" // schedule serves its metrics
	// gRetention: run (duplicate ages), status (repeats) and prune (its
	// floor) read the replay horizon.
	gRetention = "retention"
)

var settingsTable = []setting{
	{"DIGEST_DATABASE_URL", "database-url", "", "PostgreSQL URL of the ledger (and of the source tables); unset: embedded SQLite ledger", gLedger},
	{"DIGEST_LEDGER_PATH", "ledger-path", "./digest.db", "SQLite ledger file, when DIGEST_DATABASE_URL is unset", gLedger},
	{"DIGEST_SMTP_URL", "smtp-url", "", "smtp://[user@]host[:port]?tls=mandatory|opportunistic|none|implicit&auth=plain|login|cram-md5|xoauth2; unset: file outbox (with a PostgreSQL ledger only if DIGEST_OUTBOX_DIR is set)", gSend},
	{"DIGEST_SMTP_PASSWORD_FILE", "smtp-password-file", "", "file holding the SMTP password (instead of a password in the URL)", gSend},
	{"DIGEST_OUTBOX_DIR", "outbox-dir", "./outbox", "directory of the file outbox, when DIGEST_SMTP_URL is unset; with a PostgreSQL ledger it must be set on purpose", gSend},
	{"DIGEST_LOOKUP_URL", "lookup-url", "", "provider look-up for maybe-sent digests: mailpit+http://host:8025 or postmark+https://api.postmarkapp.com (token in DIGEST_POSTMARK_TOKEN_FILE); the outbox looks itself up", gSend},
	{"DIGEST_POSTMARK_TOKEN", "", "", "Postmark server token for the look-up (env only)", gSend},
	{"DIGEST_POSTMARK_TOKEN_FILE", "postmark-token-file", "", "file holding the Postmark server token for the look-up", gSend},
	{"DIGEST_HMAC_KEYS", "", "", "HMAC keyring kid:base64secret[,kid:base64secret...], current first (env only: never on a command line)", gKeys},
	{"DIGEST_HMAC_KEYS_FILE", "hmac-keys-file", "", "file holding the HMAC keyring, same format (e.g. a mounted Secret)", gKeys},
	{"DIGEST_FROM", "from", "Account digest <digest@localhost>", "From address of the digests", gSend},
	{"DIGEST_LIST_UNSUBSCRIBE", "list-unsubscribe", "", "a fixed List-Unsubscribe entry for every message (after the recipient's own DIGEST_UNSUBSCRIBE_URL), e.g. <mailto:unsubscribe@example.com>", gSend},
	{"DIGEST_UNSUBSCRIBE_URL", "unsubscribe-url", "", "per-recipient one-click unsubscribe URL (RFC 8058), https://host/path/{token} or mailto:...{token}; needs DIGEST_UNSUBSCRIBE_KEYS_FILE", gSend},
	{"DIGEST_UNSUBSCRIBE_KEYS", "", "", "unsubscribe-token keyring kid:base64secret[,...], current first: its own secrets, never the HMAC keys (env only)", gKeys},
	{"DIGEST_UNSUBSCRIBE_KEYS_FILE", "unsubscribe-keys-file", "", "file holding the unsubscribe-token keyring, same format", gKeys},
	{"DIGEST_RATE", "rate", "50", "messages per second, for the whole process", gSend},
	{"DIGEST_BURST", "burst", "10", "messages the rate limiter lets through at once", gSend},
	{"DIGEST_CONCURRENCY", "concurrency", "4", "parallel sends (and SMTP connections)", gSend},
	{"DIGEST_LEASE", "lease", "10m", "how long a claim is exclusive; a crashed run's claims are taken over after it", gSend},
	{"DIGEST_REPLAY_HORIZON", "replay-horizon", "90d", "how long after its last run a week may be replayed: prune refuses a shorter --older-than; at least 14d", gRetention},
	{"DIGEST_TZ", "tz", "UTC", "time zone of the ISO weeks (Area/City or UTC, not Local); a week is pinned to the zone of its first run", gDigest},
	{"DIGEST_TYPE", "type", "weekly_activity", "digest type (part of the business key)", gDigest},
	{"DIGEST_VERSION", "content-version", "v1", "content version (part of the business key): bump it to send a week again with new content", gDigest},
	{"DIGEST_LOG_LEVEL", "log-level", "info", "debug, info, warn or error", gLog},
	{"DIGEST_PUSHGATEWAY_URL", "pushgateway-url", "", "Prometheus Pushgateway to push run and prune metrics to at the end, e.g. http://pushgateway:9091; unset: no push", gPush},
	{"DIGEST_METRICS_ADDR", "metrics-addr", ":9090", "address where \"digest schedule\" serves /metrics and /healthz", gServe},
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

// settings holds the resolved values by environment variable name.
type settings struct {
	vals    map[string]*string
	fromEnv map[string]bool // set in the environment, not defaulted
	fs      *flag.FlagSet
}

// register adds the flags of the given groups to fs, defaulting to the
// environment. Values are read after fs.Parse.
func register(fs *flag.FlagSet, env *Env, groups ...string) *settings {
	s := &settings{vals: map[string]*string{}, fromEnv: map[string]bool{}, fs: fs}
	for _, st := range settingsTable {
		v := env.Getenv(st.env)
		s.fromEnv[st.env] = v != ""
		if v == "" {
			v = st.def
		}
		p := new(string)
		*p = v
		s.vals[st.env] = p
		if st.flag == "" || !hasGroup(groups, st.group) {
			continue
		}
		fs.Var(&settingValue{p: p, kind: settingKind(st)}, st.flag, st.help+" [$"+st.env+"]")
	}
	return s
}

func hasGroup(groups []string, g string) bool {
	for _, x := range groups {
		if x == g {
			return true
		}
	}
	return false
}

func (s *settings) str(env string) string { return *s.vals[env] }

// explicit reports whether env was set on purpose: in the environment or
// by its flag (read after fs.Parse), not left to its default.
func (s *settings) explicit(env string) bool {
	if s.fromEnv[env] {
		return true
	}
	set := false
	s.fs.Visit(func(f *flag.Flag) {
		for _, st := range settingsTable {
			if st.env == env && st.flag == f.Name {
				set = true
			}
		}
	})
	return set
}

func (s *settings) duration(env string) (time.Duration, error) {
	v := s.str(env)
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, usagef("%s=%q: want a positive duration such as 30s, 10m or 2h", env, v)
	}
	return d, nil
}

func (s *settings) positiveInt(env string, max int) (int, error) {
	v := s.str(env)
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, usagef("%s=%q: want a whole number from 1 to %d", env, v, max)
	}
	return n, nil
}

func (s *settings) positiveFloat(env string) (float64, error) {
	v := s.str(env)
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || f > 1e6 {
		return 0, usagef("%s=%q: want a positive number of messages per second", env, v)
	}
	return f, nil
}

func (s *settings) location() (*time.Location, error) {
	v := s.str("DIGEST_TZ")
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
	v := s.str("DIGEST_REPLAY_HORIZON")
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
