package listen_test

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/metrics"
	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/postgres"
	"github.com/weeklydigest/digest/listen"
	"github.com/weeklydigest/digest/unsubscribe"
)

const (
	hmacKeys  = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	tokenKeys = "u1:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="
	template  = "https://bank.example/u/{token}"
)

// world is a service on a fresh PostgreSQL schema, over loopback.
type world struct {
	t      testing.TB
	store  ledger.Store
	pool   *pgxpool.Pool // the store's: closing it takes the ledger down
	keys   *digest.Keyring
	tokens *unsubscribe.Keyring
	srv    *httptest.Server
	reg    *metrics.Serve
}

func newWorld(t *testing.T, mod func(*listen.Config)) *world { return newWorldTB(t, mod) }

func newWorldTB(t testing.TB, mod func(*listen.Config)) *world {
	t.Helper()
	ctx := context.Background()
	pool, err := postgres.NewPool(ctx, pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := postgres.New(pool, postgres.Config{})
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	keys, err := digest.ParseKeyring(hmacKeys)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := unsubscribe.ParseKeyring(tokenKeys)
	if err != nil {
		t.Fatal(err)
	}
	route, err := listen.ParseRoute(template)
	if err != nil {
		t.Fatal(err)
	}
	reg := metrics.NewServe()
	cfg := listen.Config{Ledger: store, Keys: keys, Tokens: tokens, Route: route, Metrics: reg, Rate: 1000, Burst: 1000}
	if mod != nil {
		mod(&cfg)
	}
	svc, err := listen.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	return &world{t: t, store: store, pool: pool, keys: keys, tokens: tokens, srv: srv, reg: reg}
}

// url is the unsubscribe URL of customer, on the test server.
func (w *world) url(customer string) string { return w.srv.URL + "/u/" + w.tokens.Token(customer) }

func (w *world) post(u, contentType string, body io.Reader) (*http.Response, string) {
	w.t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, body)
	if err != nil {
		w.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return w.do(req)
}

func (w *world) do(req *http.Request) (*http.Response, string) {
	w.t.Helper()
	// No redirect is ever followed: the endpoint must answer itself.
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		w.t.Fatal(err)
	}
	return res, string(b)
}

func (w *world) oneClick(customer string) (*http.Response, string) {
	w.t.Helper()
	return w.post(w.url(customer), "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
}

// suppressed returns the suppressions and history rows of customer.
func (w *world) suppressed(customer string) ([]ledger.Suppression, []ledger.SuppressionEvent) {
	w.t.Helper()
	ctx := context.Background()
	keys := w.keys.CustomerKeys(customer)
	list, err := w.store.ListSuppressions(ctx, ledger.SuppressionFilter{Keys: keys})
	if err != nil {
		w.t.Fatal(err)
	}
	hist, err := w.store.SuppressionHistory(ctx, keys, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	return list, hist
}

func (w *world) nothingRecorded() {
	w.t.Helper()
	list, err := w.store.ListSuppressions(context.Background(), ledger.SuppressionFilter{})
	if err != nil {
		w.t.Fatal(err)
	}
	hist, err := w.store.SuppressionHistory(context.Background(), nil, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	if len(list) != 0 || len(hist) != 0 {
		w.t.Fatalf("recorded %d suppressions, %d history rows; want none", len(list), len(hist))
	}
}

// The RFC 8058 POST records the suppression (reason unsubscribe, source
// one-click) and answers 200 without a cookie or a redirect; the same
// POST again is 200 and still one suppression with one history row.
func TestOneClickPostRecordsOnceAndAnswers200Again(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	for i := range 3 {
		res, body := w.oneClick("cust_0001")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("POST %d: %d %s", i+1, res.StatusCode, body)
		}
		if len(res.Cookies()) != 0 || res.Header.Get("Location") != "" {
			t.Fatalf("POST %d set a cookie or a location: %v", i+1, res.Header)
		}
	}
	list, hist := w.suppressed("cust_0001")
	if len(list) != 1 || len(hist) != 1 {
		t.Fatalf("%d suppressions, %d history rows after three POSTs; want 1 and 1", len(list), len(hist))
	}
	if s := list[0]; s.Reason != digest.ReasonUnsubscribe || s.Source != listen.Source || s.Subject != digest.SubjectCustomer {
		t.Fatalf("suppression %+v", s)
	}
	if other, _ := w.suppressed("cust_0002"); len(other) != 0 {
		t.Fatalf("another customer is suppressed: %+v", other)
	}
	// multipart/form-data is the other encoding RFC 8058 allows.
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	mw.WriteField("List-Unsubscribe", "One-Click")
	mw.Close()
	if res, body := w.post(w.url("cust_0002"), mw.FormDataContentType(), &b); res.StatusCode != http.StatusOK {
		t.Fatalf("multipart POST: %d %s", res.StatusCode, body)
	}
	if list, _ := w.suppressed("cust_0002"); len(list) != 1 {
		t.Fatalf("multipart POST recorded %d suppressions", len(list))
	}
	assertCounter(t, w.reg, "digest_unsubscribes_total", "added", 2)
	assertCounter(t, w.reg, "digest_unsubscribes_total", "already", 2)
}

// Bad input is a 4xx and records nothing.
func TestOneClickBadInputRecordsNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, func(c *listen.Config) { c.MaxBody = 1024 })
	good := w.tokens.Token("cust_0001")
	other, err := unsubscribe.ParseKeyring("u1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	if err != nil {
		t.Fatal(err)
	}
	tampered := []byte(good)
	tampered[len(tampered)-3] ^= 1
	if tampered[len(tampered)-3] == '~' || tampered[len(tampered)-3] == '/' {
		tampered[len(tampered)-3] = 'A'
	}
	form := "application/x-www-form-urlencoded"
	for _, tc := range []struct {
		name, path, ctype, body string
		want                    int
	}{
		{"forged token (another keyring)", "/u/" + other.Token("cust_0001"), form, "List-Unsubscribe=One-Click", 404},
		{"tampered token", "/u/" + string(tampered), form, "List-Unsubscribe=One-Click", 404},
		{"not a token", "/u/cust_0001", form, "List-Unsubscribe=One-Click", 404},
		{"escaped slash", "/u/" + good + "%2Fx", form, "List-Unsubscribe=One-Click", 404},
		{"wrong content type", "/u/" + good, "application/json", `{"List-Unsubscribe":"One-Click"}`, 415},
		{"no content type", "/u/" + good, "", "List-Unsubscribe=One-Click", 415},
		{"text/plain", "/u/" + good, "text/plain", "List-Unsubscribe=One-Click", 415},
		{"oversized body", "/u/" + good, form, "List-Unsubscribe=One-Click&pad=" + strings.Repeat("x", 4096), 413},
		{"no one-click field", "/u/" + good, form, "unsubscribe=yes", 400},
		{"wrong value", "/u/" + good, form, "List-Unsubscribe=one-click", 400},
		{"field twice", "/u/" + good, form, "List-Unsubscribe=One-Click&List-Unsubscribe=Other", 400},
		{"malformed form", "/u/" + good, form, "List-Unsubscribe=%zz", 400},
		{"bad multipart", "/u/" + good, "multipart/form-data; boundary=xyz", "garbage", 400},
	} {
		res, body := w.post(w.srv.URL+tc.path, tc.ctype, strings.NewReader(tc.body))
		if res.StatusCode != tc.want {
			t.Errorf("%s: %d %q; want %d", tc.name, res.StatusCode, body, tc.want)
		}
	}
	// Chunked (no Content-Length) and oversized: the reader's limit says so.
	req, _ := http.NewRequest(http.MethodPost, w.url("cust_0001"), io.MultiReader(strings.NewReader("List-Unsubscribe=One-Click&pad="), strings.NewReader(strings.Repeat("y", 4096))))
	req.Header.Set("Content-Type", form)
	req.ContentLength = -1
	if res, body := w.do(req); res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked oversized body: %d %q; want 413", res.StatusCode, body)
	}
	w.nothingRecorded()
}

// A GET shows the page (in the language Accept-Language asks for, with
// the button that POSTs the RFC 8058 form) and never unsubscribes, however
// often a scanner fetches it.
func TestGetShowsThePageAndRecordsNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	for _, tc := range []struct {
		accept string
		want   []string
	}{
		{"", []string{`<html lang="en" dir="ltr">`, ">Unsubscribe</button>"}},
		{"de-AT,de;q=0.9,en;q=0.5", []string{`<html lang="de" dir="ltr">`, ">Abbestellen</button>"}},
		{"ar-BH", []string{`<html lang="ar" dir="rtl">`, ">إلغاء الاشتراك</button>"}},
		{"ja", []string{`<html lang="ja" dir="ltr">`}},
		{"pl-PL", []string{`<html lang="en" dir="ltr">`}},
	} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			req, _ := http.NewRequest(method, w.url("cust_0001"), nil)
			if tc.accept != "" {
				req.Header.Set("Accept-Language", tc.accept)
			}
			res, body := w.do(req)
			if res.StatusCode != http.StatusOK || len(res.Cookies()) != 0 {
				t.Fatalf("%s %q: %d, cookies %v", method, tc.accept, res.StatusCode, res.Cookies())
			}
			if method == http.MethodHead {
				continue
			}
			for _, s := range append(tc.want, `<form method="post" action=""`, `name="List-Unsubscribe" value="One-Click"`) {
				if !strings.Contains(body, s) {
					t.Errorf("GET with Accept-Language %q: page lacks %q\n%s", tc.accept, s, body)
				}
			}
			if strings.Contains(body, "<script") {
				t.Errorf("page holds a script")
			}
			if res.Header.Get("Referrer-Policy") != "no-referrer" || res.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("headers %v", res.Header)
			}
		}
	}
	// A bad link: a page that says so, and a 404.
	if res, body := w.do(must(http.NewRequest(http.MethodGet, w.srv.URL+"/u/u1~AAAA", nil))); res.StatusCode != 404 || !strings.Contains(body, "not valid") {
		t.Fatalf("GET of a bad token: %d\n%s", res.StatusCode, body)
	}
	w.nothingRecorded()
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Health, readiness (the ledger answers) and metrics; a client over its
// rate gets 429 and records nothing.
func TestHealthReadyMetricsAndRateLimit(t *testing.T) {
	t.Parallel()
	w := newWorld(t, func(c *listen.Config) { c.Rate, c.Burst = 0.001, 2 })
	for _, p := range []string{"/healthz", "/readyz"} {
		if res, body := w.do(must(http.NewRequest(http.MethodGet, w.srv.URL+p, nil))); res.StatusCode != 200 {
			t.Fatalf("%s: %d %s", p, res.StatusCode, body)
		}
	}
	w.oneClick("cust_0001")
	w.oneClick("cust_0001")
	if res, _ := w.oneClick("cust_0002"); res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Fatalf("third request of a client at burst 2: %d; want 429 with Retry-After", res.StatusCode)
	}
	if list, _ := w.suppressed("cust_0002"); len(list) != 0 {
		t.Fatal("a rate-limited POST was recorded")
	}
	// Probes are not rate limited.
	for range 5 {
		if res, _ := w.do(must(http.NewRequest(http.MethodGet, w.srv.URL+"/healthz", nil))); res.StatusCode != 200 {
			t.Fatalf("healthz limited: %d", res.StatusCode)
		}
	}
	_, body := w.do(must(http.NewRequest(http.MethodGet, w.srv.URL+"/metrics", nil)))
	for _, s := range []string{`digest_unsubscribes_total{result="rate_limited"} 1`, `digest_http_requests_total{code="429",route="unsubscribe_post"} 1`, "go_goroutines"} {
		if !strings.Contains(body, s) {
			t.Errorf("metrics lack %q", s)
		}
	}
	// Not ready once the ledger is gone.
	w.pool.Close()
	if res, _ := w.do(must(http.NewRequest(http.MethodGet, w.srv.URL+"/readyz", nil))); res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("readyz with the ledger closed: %d; want 503", res.StatusCode)
	}
	if res, _ := w.do(must(http.NewRequest(http.MethodGet, w.srv.URL+"/healthz", nil))); res.StatusCode != 200 {
		t.Fatalf("healthz with the ledger closed: %d; want 200 (alive, not ready)", res.StatusCode)
	}
}

// A POST the ledger cannot record is 503, never 200.
func TestOneClickLedgerDownIs503(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.pool.Close()
	if res, body := w.oneClick("cust_0001"); res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("POST with the ledger closed: %d %s; want 503", res.StatusCode, body)
	}
}

func TestParseRoute(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, prefix string
	}{
		{"https://bank.example/u/{token}", "/u/"},
		{"https://bank.example/{token}", "/"},
		{"https://bank.example/a/b-c/{token}", "/a/b-c/"},
		{"mailto:u@bank.example?subject={token}", ""},
		{"https://bank.example/u?t={token}", ""},
		{"https://bank.example/u/{token}/x", ""},
		{"https://bank.example/{token}/{token}", ""},
		{"https://bank.example/u%20x/{token}", ""},
		{"https://bank.example/u/x{token}", ""},
	} {
		r, err := listen.ParseRoute(tc.in)
		if (err == nil) != (tc.prefix != "") || r.Prefix != tc.prefix {
			t.Errorf("ParseRoute(%q) = %q, %v; want %q", tc.in, r.Prefix, err, tc.prefix)
		}
	}
}

// tokenPaths seed FuzzRouteToken and are checked by TestRouteToken.
var tokenPaths = []struct {
	path, token string
}{
	{"/u/u1~abc-DEF_0.9", "u1~abc-DEF_0.9"},
	{"/u/", ""},
	{"/u/..", ""},
	{"/u/a/b", ""},
	{"/u/a%2Fb", ""},
	{"/u/a b", ""},
	{"/v/abc", ""},
	{"/u", ""},
	{"/u/" + strings.Repeat("a", unsubscribe.MaxTokenLen+1), ""},
}

func TestRouteToken(t *testing.T) {
	t.Parallel()
	r := listen.Route{Prefix: "/u/"}
	for _, tc := range tokenPaths {
		tok, ok := r.Token(tc.path)
		if tok != tc.token || ok != (tc.token != "") {
			t.Errorf("Token(%q) = %q, %v; want %q", tc.path, tok, ok, tc.token)
		}
	}
}

// FuzzRouteToken: whatever the path, a token is accepted only as the one
// segment after the prefix, of unreserved characters, and a real token's
// URL always parses back to it.
func FuzzRouteToken(f *testing.F) {
	for _, tc := range tokenPaths {
		f.Add(tc.path, "cust_0001")
	}
	tokens, err := unsubscribe.ParseKeyring(tokenKeys)
	if err != nil {
		f.Fatal(err)
	}
	route, err := listen.ParseRoute(template)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path, customer string) {
		if tok, ok := route.Token(path); ok {
			if route.Prefix+tok != path || strings.ContainsAny(tok, "/%?#") || len(tok) > unsubscribe.MaxTokenLen || url.PathEscape(tok) != tok {
				t.Fatalf("Token(%q) accepted %q", path, tok)
			}
		}
		// Only a customer id a source accepts gets a token (NUL, for one,
		// is a bad record; the token pads the id with NULs).
		if digest.CheckCustomerID(customer) != nil {
			return
		}
		u, err := url.Parse(must(unsubscribe.ParseTemplate(template)).Expand(tokens.Token(customer)))
		if err != nil {
			t.Fatal(err)
		}
		tok, ok := route.Token(u.EscapedPath())
		if !ok {
			t.Fatalf("the URL of %q does not parse: %s", customer, u)
		}
		if id, err := tokens.Verify(tok); err != nil || id != customer {
			t.Fatalf("round trip of %q: %q, %v", customer, id, err)
		}
	})
}

func assertCounter(t *testing.T, reg *metrics.Serve, name, result string, want float64) {
	t.Helper()
	mfs, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					if got := m.GetCounter().GetValue(); got != want {
						t.Errorf("%s{result=%q} = %v; want %v", name, result, got, want)
					}
					return
				}
			}
		}
	}
	t.Errorf("no %s{result=%q}", name, result)
}

// TestPageTextsComplete: the page speaks every language of the digests.
func TestPageTextsComplete(t *testing.T) {
	t.Parallel()
	for _, lang := range digest.Languages {
		req := httptest.NewRequest(http.MethodGet, "/u/x", nil)
		req.Header.Set("Accept-Language", lang.String())
		if got := listen.PageLanguage(req); got != lang {
			t.Errorf("Accept-Language %s picks %s", lang, got)
		}
		if !listen.HasPageText(lang) {
			t.Errorf("no page text for %s", lang)
		}
	}
}
