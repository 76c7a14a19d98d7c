package webhook_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/webhook"
)

// testKey is a digest key as the job sets it on a message.
const testKey = digest.Key("k1:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")

// testNow is the receiver's clock in the tests.
var testNow = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

// fixture reads testdata/name.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withField returns the JSON object b with the field at path (object
// keys) set to v.
func withField(t testing.TB, b []byte, v any, path ...string) []byte {
	t.Helper()
	var root map[string]any
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	m := root
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
	out, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// jsonHeader is a request header with Content-Type application/json.
func jsonHeader() http.Header {
	return http.Header{"Content-Type": {"application/json; charset=utf-8"}}
}

// want is the part of an Event a table test checks.
type want struct {
	Kind    webhook.Kind
	Key     digest.Key
	Address string
	At      string // RFC 3339, empty: not checked
	Detail  string
}

// checkEvents compares events with w, and checks every event has the
// provider's name and an ID.
func checkEvents(t *testing.T, provider string, got []webhook.Event, w []want) {
	t.Helper()
	if len(got) != len(w) {
		t.Fatalf("got %d events, want %d: %+v", len(got), len(w), got)
	}
	for i, e := range got {
		if e.Provider != provider || e.ID == "" {
			t.Errorf("event %d: provider %q, id %q", i, e.Provider, e.ID)
		}
		if e.Kind != w[i].Kind || e.Key != w[i].Key || e.Address != w[i].Address || e.Detail != w[i].Detail {
			t.Errorf("event %d: got kind %s key %q address %q detail %q, want %+v", i, e.Kind, e.Key, e.Address, e.Detail, w[i])
		}
		if w[i].At != "" && e.At.Format(time.RFC3339Nano) != w[i].At {
			t.Errorf("event %d: at %s, want %s", i, e.At.Format(time.RFC3339Nano), w[i].At)
		}
	}
}

// checkErr checks err wraps target and quotes none of secrets.
func checkErr(t *testing.T, err, target error, secrets ...string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("error %q quotes %q", err, s)
		}
	}
}

// checkParseInvariants is what every parser promises for any input: no
// panic (the caller of a fuzz target sees it), an error of the contract,
// or events that each have the provider's name, an ID and a known kind.
func checkParseInvariants(t *testing.T, name string, b webhook.Batch, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, webhook.ErrSignature) && !errors.Is(err, webhook.ErrPayload) && !errors.Is(err, webhook.ErrContentType) && !errors.Is(err, webhook.ErrUnavailable) {
			t.Fatalf("error outside the contract: %v", err)
		}
		return
	}
	for _, e := range b.Events {
		if e.Provider != name || e.ID == "" {
			t.Fatalf("event without provider or id: %+v", e)
		}
		switch e.Kind {
		case webhook.KindAccepted, webhook.KindDelivered, webhook.KindHardBounce, webhook.KindSoftBounce,
			webhook.KindComplaint, webhook.KindUnsubscribe, webhook.KindOther:
		default:
			t.Fatalf("unknown kind %q", e.Kind)
		}
		if len(e.Detail) > 64 || strings.Contains(e.Detail, "@") {
			t.Fatalf("detail %q", e.Detail)
		}
	}
}
