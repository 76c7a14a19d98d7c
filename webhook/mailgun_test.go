package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/webhook"
)

const mailgunKey = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0"

// mailgunBody wraps event-data in a request signed with key at time at.
func mailgunBody(t testing.TB, key string, at time.Time, token string, eventData []byte) []byte {
	t.Helper()
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(ts + token))
	b, err := json.Marshal(map[string]any{
		"signature":  map[string]string{"timestamp": ts, "token": token, "signature": hex.EncodeToString(mac.Sum(nil))},
		"event-data": json.RawMessage(eventData),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newMailgun(t testing.TB) *webhook.Mailgun {
	t.Helper()
	m, err := webhook.NewMailgun([]byte(mailgunKey+"\n"), 0)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

const mailgunToken = "e0b5477167110d68991efc6b9f89f0a11066af27834600e123"

func TestMailgunFixtures(t *testing.T) {
	t.Parallel()
	m := newMailgun(t)
	withKey := func(name string) []byte {
		return withField(t, fixture(t, name), string(testKey), "user-variables", webhook.CustomArg)
	}
	tests := []struct {
		name string
		data []byte
		want want
	}{
		{"accepted", withField(t, fixture(t, "mailgun/accepted.json"), map[string]string{webhook.CustomArg: string(testKey)}, "user-variables"), want{webhook.KindAccepted, testKey, "recipient@sample.mailgun.com", "2026-02-03T19:26:38.372891Z", ""}},
		{"accepted, no variables", fixture(t, "mailgun/accepted.json"), want{webhook.KindAccepted, "", "recipient@sample.mailgun.com", "", ""}},
		{"delivered", withKey("mailgun/delivered.json"), want{webhook.KindDelivered, testKey, "recipient@sample.mailgun.com", "", ""}},
		{"failed permanent", withKey("mailgun/failed-permanent.json"), want{webhook.KindHardBounce, testKey, "alice@example.com", "", "permanent suppress-bounce 605"}},
		{"failed temporary", withKey("mailgun/failed-temporary.json"), want{webhook.KindSoftBounce, testKey, "alice@example.com", "", "temporary generic 452"}},
		{"complained", withKey("mailgun/complained.json"), want{webhook.KindComplaint, testKey, "alice@example.com", "", ""}},
		{"unsubscribed", withKey("mailgun/unsubscribed.json"), want{webhook.KindUnsubscribe, testKey, "alice@example.com", "", ""}},
		{"opened", fixture(t, "mailgun/opened.json"), want{webhook.KindOther, "", "alice@example.com", "", "opened"}},
		{"a variable that is not a string", withField(t, fixture(t, "mailgun/delivered.json"), 7, "user-variables", webhook.CustomArg), want{webhook.KindDelivered, "", "recipient@sample.mailgun.com", "", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := mailgunBody(t, mailgunKey, testNow, mailgunToken, tt.data)
			b, err := m.Parse(context.Background(), jsonHeader(), body, testNow)
			if err != nil {
				t.Fatal(err)
			}
			checkEvents(t, "mailgun", b.Events, []want{tt.want})
			var id struct{ ID string }
			_ = json.Unmarshal(tt.data, &id)
			if b.Events[0].ID != id.ID {
				t.Errorf("id %q, want the event's %q", b.Events[0].ID, id.ID)
			}
		})
	}
}

func TestMailgunRefuses(t *testing.T) {
	t.Parallel()
	m := newMailgun(t)
	data := fixture(t, "mailgun/failed-permanent.json")
	good := mailgunBody(t, mailgunKey, testNow, mailgunToken, data)
	tests := []struct {
		name   string
		header string
		body   []byte
		err    error
	}{
		{"other key", "application/json", mailgunBody(t, "key-0000000000000000000000000000000", testNow, mailgunToken, data), webhook.ErrSignature},
		{"replayed", "application/json", mailgunBody(t, mailgunKey, testNow.Add(-6*time.Minute), mailgunToken, data), webhook.ErrSignature},
		{"future", "application/json", mailgunBody(t, mailgunKey, testNow.Add(6*time.Minute), mailgunToken, data), webhook.ErrSignature},
		{"unsigned", "application/json", []byte(`{"event-data":{"event":"failed"}}`), webhook.ErrSignature},
		{"signature not hex", "application/json", []byte(`{"signature":{"timestamp":"1","token":"t","signature":"zz"}}`), webhook.ErrSignature},
		{"legacy form", "multipart/form-data; boundary=x", good, webhook.ErrContentType},
		{"not JSON", "application/json", []byte(`signature=x`), webhook.ErrPayload},
		{"no event-data", "application/json", mailgunBody(t, mailgunKey, testNow, mailgunToken, []byte(`null`)), webhook.ErrPayload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := m.Parse(context.Background(), map[string][]string{"Content-Type": {tt.header}}, tt.body, testNow)
			checkErr(t, err, tt.err, mailgunKey, "alice@example.com")
		})
	}
}

// Mailgun signs only the timestamp and the token, not the event: an event
// changed after signing still verifies. TLS keeps the body intact in
// transit; the age bound and the intake's drop of a repeated event id
// limit what a captured request can do.
func TestMailgunSignsTimestampAndToken(t *testing.T) {
	t.Parallel()
	m := newMailgun(t)
	good := mailgunBody(t, mailgunKey, testNow, mailgunToken, fixture(t, "mailgun/failed-permanent.json"))
	b, err := m.Parse(context.Background(), jsonHeader(), []byte(strings.Replace(string(good), `"permanent"`, `"temporary"`, 1)), testNow)
	if err != nil || b.Events[0].Kind != webhook.KindSoftBounce {
		t.Errorf("%+v, %v", b, err)
	}
}

func TestNewMailgunRefusesMalformedKeys(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"", " \n", "short", "key with spaces in it", "key-\x00000000000000000000"} {
		_, err := webhook.NewMailgun([]byte(k), 0)
		if err == nil {
			t.Errorf("%q accepted", k)
		} else if len(k) > 5 && strings.Contains(err.Error(), k) {
			t.Errorf("error %q quotes the key", err)
		}
	}
	if s := fmt.Sprintf("%#v", newMailgun(t)); strings.Contains(s, "key-3") {
		t.Errorf("%%#v shows the key: %s", s)
	}
}
