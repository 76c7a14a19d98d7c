package lookup_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/lookup"
)

const postmarkToken = "pm-server-token-0123456789"

// postmarkServer serves GET /messages/outbound in Postmark's documented
// shape; reply decides the status and headers per call.
func postmarkServer(t *testing.T, reply func(w http.ResponseWriter, key string) bool) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		q := r.URL.Query()
		if r.URL.Path != "/messages/outbound" || q.Get("count") != "1" || q.Get("offset") != "0" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if r.Header.Get("X-Postmark-Server-Token") != postmarkToken {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"ErrorCode":10,"Message":"No Account or Server API tokens were supplied in the HTTP headers."}`))
			return
		}
		key := q.Get("metadata_digest-key")
		if reply != nil && !reply(w, key) {
			return
		}
		type msg struct {
			MessageID string
			Status    string
			Metadata  map[string]string
		}
		res := struct {
			TotalCount int
			Messages   []msg
		}{Messages: []msg{}}
		if strings.HasSuffix(key, strings.Repeat("a", 64)) {
			res.TotalCount = 1
			res.Messages = append(res.Messages, msg{MessageID: "0ac29aee-e1cd-480d-b08d-4f48548ff48d", Status: "Sent", Metadata: map[string]string{"digest-key": key}})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func TestPostmarkLookup(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 8, 10, 7, 0, 0, 0, time.UTC)
	cases := []struct {
		name      string
		key       digest.Key
		token     string
		reply     func(w http.ResponseWriter, key string) bool
		wantFound bool
		wantRef   string
		wantClass digest.SendClass
		wantRetry time.Time
		wantErr   bool
	}{
		{name: "found", key: testKey("k1", 'a'), wantFound: true, wantRef: "0ac29aee-e1cd-480d-b08d-4f48548ff48d"},
		{name: "not found", key: testKey("k1", 'b')},
		{name: "429 with Retry-After seconds", key: testKey("k1", 'a'), wantErr: true, wantClass: digest.SendTemporary, wantRetry: now.Add(30 * time.Second),
			reply: func(w http.ResponseWriter, _ string) bool {
				w.Header().Set("Retry-After", "30")
				w.WriteHeader(http.StatusTooManyRequests)
				return false
			}},
		{name: "503 with Retry-After date", key: testKey("k1", 'a'), wantErr: true, wantClass: digest.SendTemporary, wantRetry: now.Add(2 * time.Minute),
			reply: func(w http.ResponseWriter, _ string) bool {
				w.Header().Set("Retry-After", now.Add(2*time.Minute).Format(http.TimeFormat))
				w.WriteHeader(http.StatusServiceUnavailable)
				return false
			}},
		{name: "500", key: testKey("k1", 'a'), wantErr: true, wantClass: digest.SendTemporary,
			reply: func(w http.ResponseWriter, _ string) bool {
				w.WriteHeader(http.StatusInternalServerError)
				return false
			}},
		{name: "wrong token", key: testKey("k1", 'a'), token: "wrong-token-xyz", wantErr: true, wantClass: digest.SendPermanent},
		{name: "not JSON", key: testKey("k1", 'a'), wantErr: true, wantClass: digest.SendTemporary,
			reply: func(w http.ResponseWriter, _ string) bool {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte("{"))
				return false
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := postmarkServer(t, c.reply)
			token := postmarkToken
			if c.token != "" {
				token = c.token
			}
			l, err := lookup.ParseURL("postmark+"+srv.URL, lookup.Config{
				PostmarkToken: token, HTTPClient: srv.Client(), Now: func() time.Time { return now },
			})
			if err != nil {
				t.Fatal(err)
			}
			ref, found, err := l.Lookup(t.Context(), c.key)
			if c.wantErr {
				var se *digest.SendError
				if !errors.As(err, &se) || se.Class != c.wantClass || !se.RetryAt.Equal(c.wantRetry) {
					t.Fatalf("Lookup error = %v (%+v); want class %s, RetryAt %v", err, se, c.wantClass, c.wantRetry)
				}
				if strings.Contains(err.Error(), token) {
					t.Fatalf("error %q contains the token", err)
				}
				return
			}
			if err != nil || found != c.wantFound || ref != c.wantRef {
				t.Fatalf("Lookup = %q, %v, %v; want %q, %v", ref, found, err, c.wantRef, c.wantFound)
			}
		})
	}
}

func TestParseLookupURL(t *testing.T) {
	t.Parallel()
	cases := []struct {
		url, token string
		wantNil    bool
		wantErr    bool
	}{
		{url: "", wantNil: true},
		{url: "mailpit+http://127.0.0.1:8025"},
		{url: "mailpit+https://mail.example.com/mailpit/"},
		{url: "mailpit+http://user:pw@127.0.0.1:8025"},
		{url: "postmark+https://api.postmarkapp.com", token: "t"},
		{url: "postmark+https://api.postmarkapp.com", wantErr: true},
		{url: "postmark+https://tok:en@api.postmarkapp.com", token: "t", wantErr: true},
		{url: "postmark+http://api.postmarkapp.com", token: "t", wantErr: true},
		{url: "mailpit://127.0.0.1:8025", wantErr: true},
		{url: "sendgrid+https://api.sendgrid.com", wantErr: true},
		{url: "mailpit+http://", wantErr: true},
		{url: "mailpit+http://h:1?x=1", wantErr: true},
		{url: "::not a url", wantErr: true},
	}
	for _, c := range cases {
		l, err := lookup.ParseURL(c.url, lookup.Config{PostmarkToken: c.token})
		switch {
		case c.wantErr:
			if err == nil || !errors.Is(err, lookup.ErrURL) {
				t.Errorf("ParseURL(%q) = %v, %v; want ErrURL", c.url, l, err)
			}
			if err != nil && strings.Contains(err.Error(), "en@") {
				t.Errorf("error %q echoes credentials", err)
			}
		case c.wantNil:
			if l != nil || err != nil {
				t.Errorf("ParseURL(%q) = %v, %v; want nil, nil", c.url, l, err)
			}
		case err != nil || l == nil:
			t.Errorf("ParseURL(%q) = %v, %v; want a lookup", c.url, l, err)
		}
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	prevMax := time.Duration(0)
	for attempt := 1; attempt <= 40; attempt++ {
		want := min(lookup.BackoffBase<<min(attempt-1, 30), lookup.BackoffCap)
		for range 20 {
			d := lookup.Backoff(attempt)
			if d < want/2 || d > want {
				t.Fatalf("Backoff(%d) = %s, want in [%s, %s]", attempt, d, want/2, want)
			}
		}
		if want < prevMax {
			t.Fatalf("bound shrank at attempt %d", attempt)
		}
		prevMax = want
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 8, 10, 7, 0, 0, 0, time.UTC)
	cases := []struct {
		in     string
		want   time.Time
		wantOK bool
	}{
		{"120", now.Add(2 * time.Minute), true},
		{" 0 ", now, true},
		{"Mon, 10 Aug 2026 07:05:00 GMT", now.Add(5 * time.Minute), true},
		{"Mon, 10 Aug 2026 06:00:00 GMT", now, true},
		{"", time.Time{}, false},
		{"-5", time.Time{}, false},
		{"soon", time.Time{}, false},
	}
	for _, c := range cases {
		got, ok := lookup.RetryAfter(c.in, now)
		if ok != c.wantOK || !got.Equal(c.want) {
			t.Errorf("RetryAfter(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.wantOK)
		}
	}
}

// testKey returns a valid key whose hex part repeats c.
func testKey(kid string, c byte) digest.Key {
	return digest.Key(kid + ":" + strings.Repeat(string(c), 64))
}
