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
)

var settingsTable = []setting{
	{"DIGEST_DATABASE_URL", "database-url", "", "PostgreSQL URL of the ledger (and of the source tables); unset: embedded SQLite ledger", gLedger},
	{"DIGEST_LEDGER_PATH", "ledger-path", "./digest.db", "SQLite ledger file, when DIGEST_DATABASE_URL is unset", gLedger},
	{"DIGEST_SMTP_URL", "smtp-url", "", "smtp://[user@]host[:port]?tls=mandatory|opportunistic|none|implicit&auth=plain|login|cram-md5|xoauth2; unset: file outbox", gSend},
	{"DIGEST_SMTP_PASSWORD_FILE", "smtp-password-file", "", "file holding the SMTP password (instead of a password in the URL)", gSend},
	{"DIGEST_OUTBOX_DIR", "outbox-dir", "./outbox", "directory of the file outbox, when DIGEST_SMTP_URL is unset", gSend},
	{"DIGEST_LOOKUP_URL", "lookup-url", "", "provider look-up for maybe-sent digests: mailpit+http://host:8025 or postmark+https://api.postmarkapp.com (token in DIGEST_POSTMARK_TOKEN_FILE); the outbox looks itself up", gSend},
	{"DIGEST_POSTMARK_TOKEN", "", "", "Postmark server token for the look-up (env only)", gSend},
	{"DIGEST_POSTMARK_TOKEN_FILE", "postmark-token-file", "", "file holding the Postmark server token for the look-up", gSend},
	{"DIGEST_HMAC_KEYS", "", "", "HMAC keyring kid:base64secret[,kid:base64secret...], current first (env only: never on a command line)", gKeys},
	{"DIGEST_HMAC_KEYS_FILE", "hmac-keys-file", "", "file holding the HMAC keyring, same format (e.g. a mounted Secret)", gKeys},
	{"DIGEST_FROM", "from", "Account digest <digest@localhost>", "From address of the digests", gSend},
	{"DIGEST_LIST_UNSUBSCRIBE", "list-unsubscribe", "", "List-Unsubscribe header value, e.g. <https://example.com/unsubscribe>", gSend},
	{"DIGEST_RATE", "rate", "50", "messages per second, for the whole process", gSend},
	{"DIGEST_BURST", "burst", "10", "messages the rate limiter lets through at once", gSend},
	{"DIGEST_CONCURRENCY", "concurrency", "4", "parallel sends (and SMTP connections)", gSend},
	{"DIGEST_SMTP_TIMEOUT", "smtp-timeout", "8s", "bound on an SMTP dial and, separately, on one message's exchange: a send may take twice it, and the lease must be at least four times it", gSend},
	{"DIGEST_LEASE", "lease", "45s", "how long a claim is exclusive, renewed while the run holds it: a crashed run's claims are taken over this long after the crash (1s to 24h, at least 4 x DIGEST_SMTP_TIMEOUT)", gSend},
	{"DIGEST_TZ", "tz", "UTC", "time zone of the ISO weeks (Area/City)", gDigest},
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
		fmt.Fprintf(&b, "  %-27s %-22s %s%s\n", s.env, f, s.help, def)
	}
	return b.String()
}

// settings holds the resolved values by environment variable name.
type settings struct {
	vals map[string]*string
}

// register adds the flags of the given groups to fs, defaulting to the
// environment. Values are read after fs.Parse.
func register(fs *flag.FlagSet, env *Env, groups ...string) *settings {
	s := &settings{vals: map[string]*string{}}
	for _, st := range settingsTable {
		v := env.Getenv(st.env)
		if v == "" {
			v = st.def
		}
		p := new(string)
		*p = v
		s.vals[st.env] = p
		if st.flag == "" || !hasGroup(groups, st.group) {
			continue
		}
		fs.StringVar(p, st.flag, v, st.help+" [$"+st.env+"]")
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
	loc, err := time.LoadLocation(v)
	if err != nil {
		return nil, usagef("DIGEST_TZ=%q: not a time zone; want an IANA name such as Europe/Berlin or UTC", v)
	}
	return loc, nil
}
