package listen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/metrics"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/unsubscribe"
	"github.com/weeklydigest/digest/webhook"
)

// Config configures the service. Ledger, Keys, Tokens and Route are
// required; zero values of the rest take the defaults below.
type Config struct {
	// Ledger records the suppressions and answers readiness.
	Ledger ledger.Suppressions
	// Keys is the HMAC keyring (DIGEST_HMAC_KEYS): a suppression is stored
	// under the customer's key, found by the runs under every key id.
	Keys *digest.Keyring
	// Tokens verifies the unsubscribe tokens (DIGEST_UNSUBSCRIBE_KEYS).
	Tokens *unsubscribe.Keyring
	// Route is the path of the unsubscribe URLs (ParseRoute of
	// DIGEST_UNSUBSCRIBE_URL).
	Route Route
	// Metrics receives the request counts; default a new registry.
	Metrics *metrics.Serve
	// Logger receives one JSON line per request and per suppression;
	// default discards.
	Logger *slog.Logger

	// Rate and Burst bound the unsubscribe requests of one client (by
	// address, or by ClientIPHeader): default 5 per second, burst 20.
	Rate  float64
	Burst int
	// ClientIPHeader names the header that carries the client's address
	// when the service runs behind a proxy that sets it (X-Forwarded-For:
	// its last entry, the one the proxy added; X-Real-IP: the value).
	// Empty: the connection's peer address.
	ClientIPHeader string
	// MaxBody bounds a POST body: default 8 KiB (the RFC 8058 body is 26
	// bytes).
	MaxBody int64
	// LedgerTimeout bounds each ledger call of a request: default 5s.
	// A webhook request's calls share one such bound.
	LedgerTimeout time.Duration

	// Providers are the mail providers whose webhooks the service takes,
	// each at POST /webhooks/{Name}; none: no webhook route.
	Providers []webhook.Provider
	// Events records the providers' events; required with Providers.
	Events ledger.ProviderEvents
	// EventPolicy is how soft bounces suppress (DIGEST_SOFT_BOUNCE_WEEKS).
	EventPolicy ledger.EventPolicy
	// MaxWebhookBody bounds a webhook body: default DefaultMaxWebhookBody.
	// Webhooks have no per-client rate limit: a provider posts from a
	// few addresses in bursts, and every request is verified by its
	// signature before it touches the ledger.
	MaxWebhookBody int64
	// Now is the clock the providers check a signature's age against;
	// default time.Now.
	Now func() time.Time
}

// Default limits.
const (
	DefaultRate          = 5
	DefaultBurst         = 20
	DefaultMaxBody       = 8 << 10
	DefaultLedgerTimeout = 5 * time.Second
)

func (c *Config) withDefaults() error {
	if c.Ledger == nil || c.Keys == nil || c.Tokens == nil || c.Route.Prefix == "" {
		return errors.New("listen: Ledger, Keys, Tokens and Route are required")
	}
	if c.Metrics == nil {
		c.Metrics = metrics.NewServe()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Rate <= 0 {
		c.Rate = DefaultRate
	}
	if c.Burst <= 0 {
		c.Burst = DefaultBurst
	}
	if c.MaxBody <= 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.LedgerTimeout <= 0 {
		c.LedgerTimeout = DefaultLedgerTimeout
	}
	return c.webhookDefaults()
}

// Service is the HTTP service; Handler serves it.
type Service struct {
	cfg       Config
	clients   *clientLimits
	mux       *http.ServeMux
	providers map[string]webhook.Provider
}

// New returns the service of cfg.
func New(cfg Config) (*Service, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, clients: newClientLimits(cfg.Rate, cfg.Burst), mux: http.NewServeMux(), providers: map[string]webhook.Provider{}}
	for _, pr := range cfg.Providers {
		name := pr.Name()
		if _, dup := s.providers[name]; dup || name == "" || strings.ContainsAny(name, "/{}") {
			return nil, fmt.Errorf("listen: provider name %q: empty, malformed or given twice", name)
		}
		s.providers[name] = pr
		cfg.Metrics.WebhookProvider(name)
	}
	if len(s.providers) > 0 {
		s.mux.Handle("POST "+WebhookPrefix+"{provider}", s.observe("webhook", http.HandlerFunc(s.webhookPost)))
	}
	p := cfg.Route.Prefix
	s.mux.Handle("GET "+p+"{token}", s.observe("unsubscribe_page", s.limited(http.HandlerFunc(s.unsubscribePage))))
	s.mux.Handle("POST "+p+"{token}", s.observe("unsubscribe_post", s.limited(http.HandlerFunc(s.unsubscribePost))))
	s.mux.Handle("GET /healthz", s.observe("healthz", http.HandlerFunc(healthz)))
	s.mux.Handle("GET /readyz", s.observe("readyz", http.HandlerFunc(s.readyz)))
	s.mux.Handle("GET /metrics", s.observe("metrics", cfg.Metrics.Handler()))
	s.mux.Handle("/", s.observe("other", http.NotFoundHandler()))
	return s, nil
}

// Handler returns the service's handler.
func (s *Service) Handler() http.Handler { return s.mux }

// Timeouts of the http.Server: every read and write is bounded, so a slow
// or stalled client holds a connection for seconds, not forever.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	WriteTimeout      = 15 * time.Second
	IdleTimeout       = 60 * time.Second
	MaxHeaderBytes    = 16 << 10
)

// Server returns an http.Server for h with the service's timeouts.
func Server(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// ShutdownGrace bounds how long Serve waits for requests under way once
// ctx is done (Kubernetes' terminationGracePeriodSeconds must exceed it).
const ShutdownGrace = 20 * time.Second

// Serve serves h on ln until ctx is done (SIGTERM), then stops taking
// connections and waits up to ShutdownGrace for the requests under way:
// a suppression being recorded finishes and is answered.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	srv := Server(h, log)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("serving", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing requests under way", "grace", ShutdownGrace.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("stopped")
	return nil
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// readyz answers 200 when the ledger answers a read of the suppression
// list, 503 otherwise: a pod whose database is unreachable gets no
// unsubscribes it could not record.
func (s *Service) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.LedgerTimeout)
	defer cancel()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if _, err := s.cfg.Ledger.ListSuppressions(ctx, ledger.SuppressionFilter{Limit: 1}); err != nil {
		s.cfg.Logger.Warn("not ready: the ledger does not answer", "err", err)
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "ledger unavailable")
		return
	}
	fmt.Fprintln(w, "ready")
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// observe counts and logs each request of route: its pattern, never its
// path (which holds the token).
func (s *Service) observe(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.code == 0 {
			sw.code = http.StatusOK
		}
		took := time.Since(start)
		s.cfg.Metrics.ObserveRequest(route, sw.code, took)
		if route == "healthz" || route == "readyz" || route == "metrics" {
			return // probes and scrapes: counted, not logged
		}
		s.cfg.Logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("method", r.Method), slog.String("route", route), slog.Int("status", sw.code),
			slog.Duration("took", took))
	})
}

// limited refuses a client over its rate with 429.
func (s *Service) limited(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.clients.allow(clientOf(r, s.cfg.ClientIPHeader)) {
			if r.Method == http.MethodPost {
				s.cfg.Metrics.ObserveUnsubscribe("rate_limited")
			}
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many requests", http.StatusTooManyRequests)
			return
		}
		h.ServeHTTP(w, r)
	})
}
