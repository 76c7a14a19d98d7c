package listen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/webhook"
)

// WebhookPrefix is the path of the provider webhooks: POST
// /webhooks/{provider}, provider a webhook.Provider's Name.
const WebhookPrefix = "/webhooks/"

// DefaultMaxWebhookBody bounds a webhook body: SendGrid and SES batch
// events, and SNS carries a message of up to 256 KiB in its envelope.
const DefaultMaxWebhookBody = 1 << 20

// webhookAnswer is the JSON body of a webhook answered 200.
type webhookAnswer struct {
	Recorded int `json:"recorded"`
	Replays  int `json:"replays"`
	Ignored  int `json:"ignored"`
}

// webhookPost verifies, parses and records one provider webhook request.
// The order is the answer's promise: nothing is recorded before the
// request is known to be the provider's (signature) and whole (every
// event valid); 200 only once every event is committed, 503 when the
// ledger failed part way (the provider retries the request, and the
// events already recorded are replays then).
func (s *Service) webhookPost(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("provider")
	p, ok := s.providers[name]
	if !ok {
		s.cfg.Metrics.ObserveWebhook("unknown", "unknown_provider")
		s.writeText(w, http.StatusNotFound, "no such provider")
		return
	}
	refuse := func(code int, result, why string) {
		s.cfg.Metrics.ObserveWebhook(name, result)
		s.cfg.Logger.Info("webhook refused", "provider", name, "why", why, "status", code)
		s.writeText(w, code, why)
	}
	if _, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil {
		refuse(http.StatusUnsupportedMediaType, "bad_content_type", "missing or malformed Content-Type")
		return
	}
	if r.ContentLength > s.cfg.MaxWebhookBody {
		refuse(http.StatusRequestEntityTooLarge, "too_large", "body too large")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxWebhookBody))
	if err != nil {
		if _, big := errors.AsType[*http.MaxBytesError](err); big {
			refuse(http.StatusRequestEntityTooLarge, "too_large", "body too large")
			return
		}
		refuse(http.StatusBadRequest, "bad_payload", "body not read")
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.LedgerTimeout)
	defer cancel()
	batch, err := p.Parse(ctx, r.Header, body, s.cfg.Now())
	switch {
	case errors.Is(err, webhook.ErrSignature):
		refuse(http.StatusUnauthorized, "bad_signature", "signature not verified")
		return
	case errors.Is(err, webhook.ErrContentType):
		refuse(http.StatusUnsupportedMediaType, "bad_content_type", "content type not supported")
		return
	case errors.Is(err, webhook.ErrPayload):
		refuse(http.StatusBadRequest, "bad_payload", "payload not understood")
		return
	case err != nil:
		// Not the request's fault (a signing certificate not fetched):
		// the provider retries.
		s.cfg.Metrics.ObserveWebhook(name, "error")
		s.cfg.Logger.Warn("webhook not verified: try again", "provider", name, "err", err)
		w.Header().Set("Retry-After", "60")
		s.writeText(w, http.StatusServiceUnavailable, "not verified, try again later")
		return
	}
	if batch.Confirm != nil {
		if err := batch.Confirm(ctx); err != nil {
			s.cfg.Metrics.ObserveWebhook(name, "error")
			s.cfg.Logger.Warn("webhook subscription not confirmed", "provider", name, "err", err)
			s.writeText(w, http.StatusServiceUnavailable, "subscription not confirmed, try again later")
			return
		}
		s.cfg.Metrics.ObserveWebhook(name, "confirmed")
		s.cfg.Logger.Info("webhook subscription confirmed", "provider", name)
		s.writeText(w, http.StatusOK, "confirmed")
		return
	}
	events, ignored, err := s.ledgerEvents(name, batch.Events)
	if err != nil {
		refuse(http.StatusBadRequest, "bad_payload", err.Error())
		return
	}
	ans := webhookAnswer{Ignored: ignored}
	for _, e := range events {
		out, err := s.cfg.Events.RecordProviderEvent(ctx, e, s.cfg.EventPolicy)
		if err != nil {
			s.cfg.Metrics.ObserveWebhook(name, "error")
			s.cfg.Logger.Error("webhook not recorded: the ledger failed", "provider", name, "event_id", e.ID,
				"recorded", ans.Recorded, "err", err)
			w.Header().Set("Retry-After", "60")
			s.writeText(w, http.StatusServiceUnavailable, "not recorded, try again later")
			return
		}
		if out.Replay {
			ans.Replays++
			s.cfg.Metrics.ObserveIgnored(name, "replay")
			continue
		}
		ans.Recorded++
		s.cfg.Metrics.ObserveEvent(name, string(e.Kind))
		attrs := []slog.Attr{slog.String("provider", name), slog.String("event_id", e.ID), slog.String("kind", string(e.Kind)),
			slog.String("key", string(e.Key)), slog.String("address_key", string(e.AddressKey()))}
		if out.Suppressed {
			s.cfg.Metrics.ObserveWebhookSuppression(name, string(out.Reason))
			s.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "address suppressed", append(attrs, slog.String("reason", string(out.Reason)))...)
		}
		if e.Kind == ledger.EventSoftBounce && !out.Suppressed {
			s.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "soft bounce counted", append(attrs, slog.Int("weeks", out.SoftBounceWeeks))...)
		}
	}
	s.cfg.Metrics.ObserveWebhook(name, "ok")
	b, _ := json.Marshal(ans)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	w.Write(append(b, '\n'))
}

// ledgerEvents turns a batch's events into what the ledger stores: the
// address becomes its keys (the address itself goes no further); events
// the job does not act on (KindOther, or a kind it does not know) or that
// name neither a key nor an address are counted and dropped. An event the
// ledger would refuse (a malformed key or id) refuses the whole request
// before anything is recorded.
func (s *Service) ledgerEvents(provider string, in []webhook.Event) ([]ledger.ProviderEvent, int, error) {
	out := make([]ledger.ProviderEvent, 0, len(in))
	ignored := 0
	for _, e := range in {
		if e.Kind == webhook.KindOther || !slices.Contains(ledger.EventKinds, ledger.EventKind(e.Kind)) {
			ignored++
			s.cfg.Metrics.ObserveIgnored(provider, "other")
			continue
		}
		addr := strings.TrimSpace(e.Address)
		if e.Key == "" && addr == "" {
			ignored++
			s.cfg.Metrics.ObserveIgnored(provider, "unnamed")
			continue
		}
		le := ledger.ProviderEvent{Provider: provider, ID: e.ID, Kind: ledger.EventKind(e.Kind), Key: e.Key,
			Detail: clipDetail(e.Detail, addr), Occurred: e.At}
		if addr != "" {
			le.AddressKeys = s.cfg.Keys.AddressKeys(addr)
		}
		if err := le.Validate(); err != nil {
			return nil, 0, errors.New("an event is malformed: " + strings.TrimPrefix(err.Error(), ledger.ErrInvalid.Error()+": "))
		}
		out = append(out, le)
	}
	return out, ignored, nil
}

// clipDetail keeps a provider's detail short, printable and free of
// addresses (an SMTP reply often quotes the recipient): the event's
// address, and any word holding an '@', become "<address>".
func clipDetail(s, addr string) string {
	s = digest.RedactAddress(s, addr)
	if strings.Contains(s, "@") {
		words := strings.Fields(s)
		for i, w := range words {
			if strings.Contains(w, "@") {
				words[i] = "<address>"
			}
		}
		s = strings.Join(words, " ")
	}
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > 120 {
		s = strings.ToValidUTF8(s[:120], "")
	}
	return s
}

// The webhook settings' defaults, and the clock.
func (c *Config) webhookDefaults() error {
	if c.MaxWebhookBody <= 0 {
		c.MaxWebhookBody = DefaultMaxWebhookBody
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if len(c.Providers) > 0 && c.Events == nil {
		return errors.New("listen: Providers need Events, the ledger the webhooks are recorded in")
	}
	if len(c.Providers) > 0 && strings.HasPrefix(c.Route.Prefix, WebhookPrefix) {
		return fmt.Errorf("listen: the unsubscribe path %s lies under the webhooks' %s", c.Route.Prefix, WebhookPrefix)
	}
	return nil
}
