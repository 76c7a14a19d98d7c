package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/metrics"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/listen"
	"github.com/weeklydigest/digest/unsubscribe"
	"github.com/weeklydigest/digest/webhook"
)

const serveHelp = `Usage: digest serve [flags]

Runs the HTTP service beside the runs, on the same ledger database: the
one-click unsubscribe endpoint (RFC 8058) behind DIGEST_UNSUBSCRIBE_URL,
and /healthz, /readyz and /metrics for Kubernetes. It runs until SIGTERM,
then stops taking connections and finishes the requests under way.

  POST <unsubscribe URL>  with the form body List-Unsubscribe=One-Click
                          (application/x-www-form-urlencoded or
                          multipart/form-data): verifies the token and puts
                          the customer on the ledger's suppression list
                          (reason unsubscribe, source one-click) before it
                          answers 200, and 200 again for a token already
                          used. A bad token is 404, a wrong content type 415,
                          a body over 8 KiB 413; nothing is recorded.
  GET <unsubscribe URL>   a small page in the language Accept-Language asks
                          for, with one button that POSTs; never unsubscribes
                          (link scanners fetch every URL of a message).
  POST /webhooks/PROVIDER a mail provider's event webhook (postmark, ses,
                          sendgrid, mailgun, resend: each served when its
                          key file is set). Verified (401 when not), read
                          (400, 413, 415 when not its payload), then each
                          event naming a digest key or an address recorded
                          before the 200: hard bounces, complaints and the
                          provider's unsubscribes suppress the address, soft
                          bounces in DIGEST_SOFT_BOUNCE_WEEKS consecutive
                          ISO weeks too; replays are ignored. 503 when the
                          ledger fails: the provider retries.
  GET /healthz            200 while the process runs (liveness).
  GET /readyz             200 when the ledger answers, else 503 (readiness).
  GET /metrics            Prometheus metrics (digest_http_requests_total,
                          digest_unsubscribes_total,
                          digest_webhook_requests_total, ...).

DIGEST_UNSUBSCRIBE_URL must be https://host/path/{token}: the service
answers on /path/. Unsubscribe requests are limited per client
(DIGEST_SERVE_RATE per second, bursts of DIGEST_SERVE_BURST): behind an
ingress, set DIGEST_CLIENT_IP_HEADER to the header it sets (X-Forwarded-For
or X-Real-IP), or every client shares the ingress's budget. Logs are JSON
lines that never hold a token or an address.

Exit codes: 0 stopped by SIGTERM after finishing its requests; 1 the
ledger or the listener failed; 2 usage or configuration error.

Examples:
  DIGEST_UNSUBSCRIBE_URL=https://bank.example/u/{token} digest serve
  digest serve --listen-addr :8080 --client-ip-header X-Forwarded-For
`

func cmdServe(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "serve", serveHelp)
	st := register(fs, env, "serve")
	st.changesLedger()
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	ss, err := parseServe(st)
	if err != nil {
		return err
	}
	log := newLogger(env, ss.level)
	route, ring, rate, burst := ss.route, ss.ring, ss.rate, ss.burst
	keys, err := loadKeyring(ss.keys, ss.ledger, log)
	if err != nil {
		return err
	}
	if sharesSecret(ring, keys) {
		return usagef("the unsubscribe keyring shares a secret with the HMAC keyring: give it its own (head -c 32 /dev/urandom | base64)")
	}
	tokens, err := unsubscribe.NewKeyring(ring)
	if err != nil {
		return err
	}
	store, err := openLedger(ctx, env, ss.ledger, log)
	if err != nil {
		return err
	}
	defer store.Close()
	providers, err := webhookProviders(ss.webhooks, ss.sesTopics)
	if err != nil {
		return err
	}
	svc, err := listen.New(listen.Config{
		Ledger: store, Keys: keys, Tokens: tokens, Route: route, Metrics: metrics.NewServe(), Logger: log,
		Rate: rate, Burst: burst, ClientIPHeader: ss.clientIPHeader,
		Providers: providers, Events: store, EventPolicy: ledger.EventPolicy{SoftBounceWeeks: ss.softBounceWeeks},
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", ss.listenAddr)
	if err != nil {
		return usagef("DIGEST_LISTEN_ADDR=%q: %v", ss.listenAddr, err)
	}
	names := make([]string, len(providers))
	for i, p := range providers {
		names[i] = p.Name()
	}
	log.Info("digest serve", "unsubscribe_path", route.Prefix+"{token}", "rate", rate, "burst", burst, "webhooks", names)
	return listen.Serve(ctx, ln, svc.Handler(), log)
}

// serveSettings are the settings of "digest serve", parsed.
type serveSettings struct {
	route           listen.Route
	ring            *digest.Keyring // the unsubscribe-token keyring
	rate            float64         // requests per second per client
	burst           int
	softBounceWeeks int
	listenAddr      string
	clientIPHeader  string
	webhooks        webhook.Files
	sesTopics       []string
	level           slog.Level
	ledger          ledgerConfig
	keys            keyConfig
}

// parseServe reads serve's settings, refusing a service without an
// unsubscribe URL and keyring.
func parseServe(st *settings) (serveSettings, error) {
	ss := serveSettings{level: st.logLevel(), ledger: st.ledger(), keys: st.hmacKeys(),
		listenAddr: st.get("DIGEST_LISTEN_ADDR"), clientIPHeader: st.get("DIGEST_CLIENT_IP_HEADER"),
		webhooks: webhook.Files{
			PostmarkCredentials: st.get("DIGEST_POSTMARK_WEBHOOK_AUTH_FILE"),
			SESCertificates:     st.get("DIGEST_SES_CERTIFICATES_FILE"),
			SendGridPublicKey:   st.get("DIGEST_SENDGRID_WEBHOOK_KEY_FILE"),
			MailgunSigningKey:   st.get("DIGEST_MAILGUN_WEBHOOK_KEY_FILE"),
			ResendSecret:        st.get("DIGEST_RESEND_WEBHOOK_SECRET_FILE"),
		}}
	for _, t := range strings.Split(st.get("DIGEST_SES_TOPICS"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			ss.sesTopics = append(ss.sesTopics, t)
		}
	}
	uc := st.unsubscribe()
	if uc.URL == "" {
		return ss, usagef("DIGEST_UNSUBSCRIBE_URL is not set: digest serve answers the one-click URLs of the digests, https://host/path/{token}")
	}
	var err error
	if ss.route, err = listen.ParseRoute(uc.URL); err != nil {
		return ss, usagef("DIGEST_UNSUBSCRIBE_URL: %v", err)
	}
	if ss.ring, err = loadUnsubscribeKeys(uc); err != nil {
		return ss, err
	}
	if ss.ring == nil {
		return ss, usagef("no unsubscribe keyring: set DIGEST_UNSUBSCRIBE_KEYS_FILE (or DIGEST_UNSUBSCRIBE_KEYS), the keyring the runs make the tokens with")
	}
	raw := st.get("DIGEST_SERVE_RATE")
	if ss.rate, err = strconv.ParseFloat(raw, 64); err != nil || ss.rate <= 0 {
		return ss, usagef("DIGEST_SERVE_RATE=%q: want a positive number of requests per second", raw)
	}
	if ss.burst, err = st.positiveInt("DIGEST_SERVE_BURST", 100_000); err != nil {
		return ss, err
	}
	if ss.softBounceWeeks, err = st.positiveInt("DIGEST_SOFT_BOUNCE_WEEKS", 52); err != nil {
		return ss, err
	}
	return ss, nil
}

// webhookProviders builds the providers whose key files (or, for SES,
// topics) are set: each is served at /webhooks/{name}. A key file that is
// unreadable, empty or malformed is a configuration error, named without
// its content.
func webhookProviders(files webhook.Files, topics []string) ([]webhook.Provider, error) {
	providers, err := webhook.FromFiles(files, webhook.Options{SESTopics: topics, Client: &http.Client{Timeout: 10 * time.Second}})
	if err != nil {
		return nil, usagef("webhooks: %v", err)
	}
	return providers, nil
}
