package postmark_test

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
	"github.com/weeklydigest/digest/sender/postmark"
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
			l := postmark.New(srv.URL, token, srv.Client(), func() time.Time { return now })
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

// testKey returns a valid key whose hex part repeats c.
func testKey(kid string, c byte) digest.Key {
	return digest.Key(kid + ":" + strings.Repeat(string(c), 64))
}
