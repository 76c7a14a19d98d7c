package postmark_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender/postmark"
	"github.com/weeklydigest/digest/verify"
)

// The look-up answers "digest verify" by counting.
var _ verify.Counter = (*postmark.Lookup)(nil)

// Postmark's Count is the search's TotalCount, replayed from an httptest
// server answering in Postmark's documented outbound-search shape: none,
// once, twice. A reply naming another key's metadata is an error, not a
// count.
func TestPostmarkCount(t *testing.T) {
	t.Parallel()
	counts := map[string]int{string(testKey("k1", 'a')): 1, string(testKey("k1", 'b')): 2}
	wrong := string(testKey("k1", 'e'))
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/messages/outbound" || r.Header.Get("X-Postmark-Server-Token") != postmarkToken {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		key := q.Get("metadata_digest-key")
		n := counts[key]
		count, _ := strconv.Atoi(q.Get("count"))
		var msgs []string
		for i := range min(n, count) {
			meta := key
			if key == wrong {
				meta = string(testKey("k1", 'f'))
			}
			msgs = append(msgs, fmt.Sprintf(`{"Tag":"","MessageID":"id-%d","To":[{"Email":"x@example.com","Name":null}],"Cc":[],"Bcc":[],"Recipients":["x@example.com"],"ReceivedAt":"2026-08-10T07:00:00-04:00","From":"digest@bank.example","Subject":"Your week","Attachments":[],"Status":"Sent","TrackOpens":false,"TrackLinks":"None","Metadata":{"digest-key":%q},"MessageStream":"outbound"}`, i, meta))
		}
		if key == wrong {
			n = 1
			msgs = []string{strings.Replace(`{"MessageID":"id-x","Metadata":{"digest-key":"OTHER"}}`, "OTHER", string(testKey("k1", 'f')), 1)}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"TotalCount":%d,"Messages":[%s]}`, n, strings.Join(msgs, ","))
	}))
	t.Cleanup(srv.Close)
	p := postmark.New(srv.URL, postmarkToken, srv.Client(), nil)
	for key, want := range map[digest.Key]int{testKey("k1", 'a'): 1, testKey("k1", 'b'): 2, testKey("k1", 'c'): 0} {
		if got, err := p.Count(context.Background(), key); err != nil || got != want {
			t.Errorf("Count(%s) = %d, %v; want %d", key, got, err, want)
		}
	}
	if got, err := p.Count(context.Background(), digest.Key(wrong)); err == nil {
		t.Errorf("Count of a reply naming another key = %d, nil; want an error", got)
	}
}
