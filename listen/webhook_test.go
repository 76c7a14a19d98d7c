package listen_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/metrics"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/listen"
	"github.com/weeklydigest/digest/webhook"
)

// fakeProvider is a webhook.Provider of pure logic for the intake's
// tests: the signature is the header X-Fake-Signature: ok, the body JSON
// (fakeBody), the content type application/json.
type fakeProvider struct {
	confirmed atomic.Int64
	confirm   error // what Confirm returns
}

type fakeBody struct {
	Confirm bool        `json:"confirm"`
	Events  []fakeEvent `json:"events"`
}

type fakeEvent struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Key     string `json:"key"`
	Address string `json:"address"`
	At      string `json:"at"`
	Detail  string `json:"detail"`
}

func (*fakeProvider) Name() string { return "fake" }

func (f *fakeProvider) Parse(_ context.Context, h http.Header, body []byte, now time.Time) (webhook.Batch, error) {
	if h.Get("X-Fake-Fail") != "" {
		return webhook.Batch{}, errors.New("signing certificate not fetched")
	}
	if mt, _, _ := mime.ParseMediaType(h.Get("Content-Type")); mt != "application/json" {
		return webhook.Batch{}, fmt.Errorf("%w: %s", webhook.ErrContentType, mt)
	}
	if h.Get("X-Fake-Signature") != "ok" {
		return webhook.Batch{}, webhook.ErrSignature
	}
	var b fakeBody
	if err := json.Unmarshal(body, &b); err != nil {
		return webhook.Batch{}, fmt.Errorf("%w: %v", webhook.ErrPayload, err)
	}
	if b.Confirm {
		return webhook.Batch{Confirm: func(context.Context) error {
			f.confirmed.Add(1)
			return f.confirm
		}}, nil
	}
	var out webhook.Batch
	for _, e := range b.Events {
		at, err := time.Parse(time.RFC3339, e.At)
		if err != nil {
			return webhook.Batch{}, fmt.Errorf("%w: %v", webhook.ErrPayload, err)
		}
		out.Events = append(out.Events, webhook.Event{Provider: "fake", ID: e.ID, Kind: webhook.Kind(e.Kind),
			Key: digest.Key(e.Key), Address: e.Address, At: at, Detail: e.Detail})
	}
	return out, nil
}

// webhookWorld is a service taking the fake provider's webhooks, with
// its log captured.
type webhookWorld struct {
	*world
	fake *fakeProvider
	log  *lockedWriter
}

func newWebhookWorld(t testing.TB, mod func(*listen.Config)) *webhookWorld {
	t.Helper()
	fake := &fakeProvider{}
	log := &lockedWriter{}
	w := newWorldTB(t, func(c *listen.Config) {
		c.Providers = []webhook.Provider{fake}
		c.Events = newWebhookEvents(c)
		c.Logger = slog.New(slog.NewJSONHandler(log, nil))
		if mod != nil {
			mod(c)
		}
	})
	return &webhookWorld{world: w, fake: fake, log: log}
}

// newWebhookEvents is the service's ledger as the events' ledger.
func newWebhookEvents(c *listen.Config) ledger.ProviderEvents {
	return c.Ledger.(ledger.ProviderEvents)
}

// postEvents posts body to provider's webhook, signed or not.
func (w *webhookWorld) postEvents(provider string, body any, signed bool, header ...string) (*http.Response, string) {
	w.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			w.t.Fatal(err)
		}
	}
	req, err := http.NewRequest(http.MethodPost, w.srv.URL+"/webhooks/"+provider, bytes.NewReader(raw))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if signed {
		req.Header.Set("X-Fake-Signature", "ok")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return w.do(req)
}

// nothingFromWebhooks fails unless the ledger holds no provider event
// and no suppression.
func (w *webhookWorld) nothingFromWebhooks() {
	w.t.Helper()
	w.nothingRecorded()
	wms, err := w.store.Watermarks(context.Background())
	if err != nil || len(wms) != 0 {
		w.t.Fatalf("provider events recorded: %+v, %v", wms, err)
	}
}

func (w *webhookWorld) addressSuppressed(addr string) bool {
	w.t.Helper()
	got, err := w.store.Suppressed(context.Background(), w.keys.AddressKeys(addr))
	if err != nil {
		w.t.Fatal(err)
	}
	return len(got) > 0
}

func (w *webhookWorld) key(customer string) digest.Key {
	return w.keys.Key(digest.Identity{Customer: customer, Week: digest.ISOWeek{Year: 2026, Week: 48}, Type: "weekly_activity", Version: "v1"})
}

// counterValue is the value of name's series with exactly labels.
func counterValue(t *testing.T, reg *metrics.Serve, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}

var at = time.Date(2026, time.November, 30, 7, 0, 0, 0, time.UTC).Format(time.RFC3339)

// A signed batch is recorded: every event naming a key or an address is
// stored, hard bounces, complaints and the provider's unsubscribes
// suppress the address, other kinds and unnamed events are counted and
// dropped; the same batch again is all replays and changes nothing. The
// log names keys, never an address.
func TestWebhookRecordsEventsOnceAndSuppresses(t *testing.T) {
	t.Parallel()
	w := newWebhookWorld(t, nil)
	batch := fakeBody{Events: []fakeEvent{
		{ID: "e1", Kind: "delivered", Key: string(w.key("cust_1")), Address: "Ann@Example.com", At: at},
		{ID: "e2", Kind: "hard_bounce", Key: string(w.key("cust_2")), Address: "bob@example.com", At: at, Detail: "smtp;550 5.1.1 <bob@example.com>: no such user"},
		{ID: "e3", Kind: "complaint", Address: "carol@example.com", At: at},
		{ID: "e4", Kind: "unsubscribe", Address: "dan@example.com", At: at},
		{ID: "e5", Kind: "soft_bounce", Address: "eve@example.com", At: at},
		{ID: "e6", Kind: "other", Address: "ann@example.com", At: at},
		{ID: "e7", Kind: "delivered", At: at},
		{ID: "e8", Kind: "bounced_in_the_future", Address: "ann@example.com", At: at},
	}}
	res, body := w.postEvents("fake", batch, true)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `"recorded":5`) || !strings.Contains(body, `"ignored":3`) {
		t.Fatalf("POST: %d %s; want 200, 5 recorded, 3 ignored", res.StatusCode, body)
	}
	for addr, want := range map[string]bool{"ann@example.com": false, "bob@example.com": true, "carol@example.com": true,
		"dan@example.com": true, "eve@example.com": false} {
		if got := w.addressSuppressed(addr); got != want {
			t.Errorf("%s suppressed: %v, want %v", addr, got, want)
		}
	}
	ev, err := w.store.EventEvidence(context.Background(), "fake", w.key("cust_1"))
	if err != nil || len(ev.Events) != 1 || ev.Events[0].Kind != ledger.EventDelivered || ev.Events[0].AddressKey() != w.keys.AddressKeys("ann@example.com")[0] {
		t.Fatalf("events of cust_1: %+v, %v", ev.Events, err)
	}
	ev, _ = w.store.EventEvidence(context.Background(), "fake", w.key("cust_2"))
	if len(ev.Events) != 1 || strings.Contains(ev.Events[0].Detail, "@") {
		t.Fatalf("events of cust_2: %+v; want the bounce, its detail without the address", ev.Events)
	}

	res, body = w.postEvents("fake", batch, true)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `"recorded":0`) || !strings.Contains(body, `"replays":5`) {
		t.Fatalf("the same POST again: %d %s; want 200, 5 replays", res.StatusCode, body)
	}
	list, err := w.store.ListSuppressions(context.Background(), ledger.SuppressionFilter{})
	if err != nil || len(list) != 3 {
		t.Fatalf("suppressions: %+v, %v; want 3", list, err)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"digest_webhook_requests_total", map[string]string{"provider": "fake", "result": "ok"}, 2},
		{"digest_webhook_events_total", map[string]string{"provider": "fake", "kind": "delivered"}, 1},
		{"digest_webhook_events_total", map[string]string{"provider": "fake", "kind": "hard_bounce"}, 1},
		{"digest_webhook_events_ignored_total", map[string]string{"provider": "fake", "reason": "replay"}, 5},
		{"digest_webhook_events_ignored_total", map[string]string{"provider": "fake", "reason": "other"}, 4},
		{"digest_webhook_events_ignored_total", map[string]string{"provider": "fake", "reason": "unnamed"}, 2},
		{"digest_webhook_suppressions_total", map[string]string{"provider": "fake", "reason": "complaint"}, 1},
	} {
		if got := counterValue(t, w.reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	logged := w.log.String()
	if !strings.Contains(logged, "address suppressed") || strings.Contains(logged, "@") {
		t.Fatalf("log: want the suppressions by address_key and no address:\n%s", logged)
	}
}

// A request that is not the provider's, or not whole, is a clear 4xx and
// records nothing: forged signature 401, content type 415, oversized 413,
// invalid JSON or a malformed event 400 (even after a good one), unknown
// provider 404.
func TestWebhookBadInputRecordsNothing(t *testing.T) {
	t.Parallel()
	w := newWebhookWorld(t, func(c *listen.Config) { c.MaxWebhookBody = 4096 })
	good := fakeBody{Events: []fakeEvent{{ID: "e1", Kind: "hard_bounce", Address: "bob@example.com", At: at}}}
	malformed := fakeBody{Events: []fakeEvent{good.Events[0], {ID: "", Kind: "complaint", Address: "x@example.com", At: at}}}
	badKey := fakeBody{Events: []fakeEvent{{ID: "e9", Kind: "delivered", Key: "not-a-key", At: at}}}
	for _, tc := range []struct {
		name     string
		provider string
		body     any
		signed   bool
		header   []string
		want     int
	}{
		{"forged", "fake", good, false, nil, http.StatusUnauthorized},
		{"wrong signature", "fake", good, false, []string{"X-Fake-Signature", "forged"}, http.StatusUnauthorized},
		{"content type", "fake", good, true, []string{"Content-Type", "text/xml"}, http.StatusUnsupportedMediaType},
		{"no content type", "fake", good, true, []string{"Content-Type", ";;"}, http.StatusUnsupportedMediaType},
		{"oversized", "fake", `{"events":[` + strings.Repeat(" ", 5000) + `]}`, true, nil, http.StatusRequestEntityTooLarge},
		{"invalid JSON", "fake", `{"events":[`, true, nil, http.StatusBadRequest},
		{"malformed event", "fake", malformed, true, nil, http.StatusBadRequest},
		{"malformed key", "fake", badKey, true, nil, http.StatusBadRequest},
		{"unknown provider", "nosuch", good, true, nil, http.StatusNotFound},
		{"transient", "fake", good, true, []string{"X-Fake-Fail", "1"}, http.StatusServiceUnavailable},
	} {
		res, body := w.postEvents(tc.provider, tc.body, tc.signed, tc.header...)
		if res.StatusCode != tc.want {
			t.Errorf("%s: %d %s; want %d", tc.name, res.StatusCode, body, tc.want)
		}
	}
	w.nothingFromWebhooks()
	if got := counterValue(t, w.reg, "digest_webhook_requests_total", map[string]string{"provider": "fake", "result": "bad_signature"}); got != 2 {
		t.Errorf("bad_signature = %v, want 2", got)
	}
	if got := counterValue(t, w.reg, "digest_webhook_requests_total", map[string]string{"provider": "unknown", "result": "unknown_provider"}); got != 1 {
		t.Errorf("unknown_provider = %v, want 1", got)
	}
	// A GET of the webhook is not a route.
	res, err := http.Get(w.srv.URL + "/webhooks/fake")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode/100 != 4 {
		t.Fatalf("GET /webhooks/fake: %d, want a 4xx", res.StatusCode)
	}
}

// A ledger that fails is a 503 with Retry-After (the provider retries),
// never a 200.
func TestWebhookLedgerDownIs503(t *testing.T) {
	t.Parallel()
	w := newWebhookWorld(t, func(c *listen.Config) { c.LedgerTimeout = 2 * time.Second })
	w.pool.Close()
	res, body := w.postEvents("fake", fakeBody{Events: []fakeEvent{{ID: "e1", Kind: "complaint", Address: "bob@example.com", At: at}}}, true)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("POST with the ledger closed: %d %s %v; want 503 with Retry-After", res.StatusCode, body, res.Header)
	}
	if got := counterValue(t, w.reg, "digest_webhook_requests_total", map[string]string{"provider": "fake", "result": "error"}); got != 1 {
		t.Errorf("error = %v, want 1", got)
	}
}

// A subscription handshake is confirmed and answered 200; a failed
// confirmation is a 503, so the provider sends it again.
func TestWebhookConfirmsSubscription(t *testing.T) {
	t.Parallel()
	w := newWebhookWorld(t, nil)
	if res, body := w.postEvents("fake", fakeBody{Confirm: true}, true); res.StatusCode != http.StatusOK || w.fake.confirmed.Load() != 1 {
		t.Fatalf("confirmation: %d %s, confirmed %d", res.StatusCode, body, w.fake.confirmed.Load())
	}
	w.fake.confirm = errors.New("topic unreachable")
	if res, body := w.postEvents("fake", fakeBody{Confirm: true}, true); res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("failed confirmation: %d %s; want 503", res.StatusCode, body)
	}
	if res, _ := w.postEvents("fake", fakeBody{Confirm: true}, false); res.StatusCode != http.StatusUnauthorized || w.fake.confirmed.Load() != 2 {
		t.Fatalf("forged confirmation: %d, confirmed %d; want 401 and not called", res.StatusCode, w.fake.confirmed.Load())
	}
	w.nothingFromWebhooks()
}

// Soft bounces suppress an address after DIGEST_SOFT_BOUNCE_WEEKS
// consecutive weeks of them, through the intake.
func TestWebhookSoftBounceStreakSuppresses(t *testing.T) {
	t.Parallel()
	w := newWebhookWorld(t, func(c *listen.Config) { c.EventPolicy = ledger.EventPolicy{SoftBounceWeeks: 2} })
	for i, day := range []string{"2026-11-16T08:00:00Z", "2026-11-18T08:00:00Z", "2026-11-23T08:00:00Z"} {
		if w.addressSuppressed("soft@example.com") {
			t.Fatalf("suppressed before soft bounce %d", i+1)
		}
		res, body := w.postEvents("fake", fakeBody{Events: []fakeEvent{{ID: fmt.Sprint("s", i), Kind: "soft_bounce", Address: "soft@example.com", At: day}}}, true)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("soft bounce %d: %d %s", i+1, res.StatusCode, body)
		}
	}
	if !w.addressSuppressed("soft@example.com") {
		t.Fatal("not suppressed after soft bounces in two weeks in a row")
	}
}

// The service refuses a provider list it cannot route.
func TestWebhookConfigRefused(t *testing.T) {
	t.Parallel()
	keys, _ := digest.ParseKeyring(hmacKeys)
	route, _ := listen.ParseRoute("https://bank.example/webhooks/{token}")
	for name, cfg := range map[string]listen.Config{
		"no events ledger": {Providers: []webhook.Provider{&fakeProvider{}}},
		"twice":            {Providers: []webhook.Provider{&fakeProvider{}, &fakeProvider{}}},
		"path under":       {Providers: []webhook.Provider{&fakeProvider{}}, Route: route},
	} {
		w := newWorldTB(t, nil)
		cfg.Ledger, cfg.Keys, cfg.Tokens = w.store, keys, w.tokens
		if cfg.Route.Prefix == "" {
			cfg.Route, _ = listen.ParseRoute(template)
		}
		if name != "no events ledger" {
			cfg.Events = w.store
		}
		if _, err := listen.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// lockedWriter serialises the handler goroutines' log writes.
type lockedWriter struct {
	mu sync.Mutex
	w  bytes.Buffer
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
