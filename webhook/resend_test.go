package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/webhook"
)

// resendSecret is a Svix endpoint secret as Resend shows it.
var resendSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

// svixHeader signs id.timestamp.body as Svix does, under secret.
func svixHeader(t testing.TB, secret, id string, at time.Time, body []byte) http.Header {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	h := jsonHeader()
	h.Set("svix-id", id)
	h.Set("svix-timestamp", ts)
	h.Set("svix-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return h
}

func newResend(t testing.TB) *webhook.Resend {
	t.Helper()
	r, err := webhook.NewResend([]byte(resendSecret+"\n"), 0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestResendFixtures(t *testing.T) {
	t.Parallel()
	r := newResend(t)
	tag, _ := webhook.TagValue(testKey)
	withHeader := func(name string) []byte {
		return withField(t, fixture(t, name), []map[string]string{{"name": "X-Digest-Key", "value": string(testKey)}}, "data", "headers")
	}
	const a = "delivered@resend.dev"
	tests := []struct {
		name string
		body []byte
		want want
	}{
		{"sent, key in a header", withHeader("resend/email.sent.json"), want{webhook.KindAccepted, testKey, a, "2024-02-22T23:41:12.126Z", ""}},
		{"delivered, key in a tag", withField(t, fixture(t, "resend/email.delivered.json"), tag, "data", "tags", webhook.TagName), want{webhook.KindDelivered, testKey, a, "", ""}},
		{"delivered, tags as a list", withField(t, fixture(t, "resend/email.delivered.json"), []map[string]string{{"name": webhook.TagName, "value": tag}}, "data", "tags"), want{webhook.KindDelivered, testKey, a, "", ""}},
		{"delivered, headers as an object", withField(t, fixture(t, "resend/email.delivered.json"), map[string]string{"x-digest-key": string(testKey)}, "data", "headers"), want{webhook.KindDelivered, testKey, a, "", ""}},
		{"delivered, no key", fixture(t, "resend/email.delivered.json"), want{webhook.KindDelivered, "", a, "", ""}},
		{"bounced", withHeader("resend/email.bounced.json"), want{webhook.KindHardBounce, testKey, a, "2024-11-22T23:41:12.126Z", "Permanent Suppressed"}},
		{"bounced transient", withField(t, withHeader("resend/email.bounced.json"), "Transient", "data", "bounce", "type"), want{webhook.KindSoftBounce, testKey, a, "", "Transient Suppressed"}},
		{"complained", withHeader("resend/email.complained.json"), want{webhook.KindComplaint, testKey, a, "", ""}},
		{"delivery delayed", withHeader("resend/email.delivery_delayed.json"), want{webhook.KindOther, testKey, a, "", "email.delivery_delayed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := r.Parse(context.Background(), svixHeader(t, resendSecret, "msg_p5jXN8AQM9LWM0D4loKWxJek", testNow, tt.body), tt.body, testNow)
			if err != nil {
				t.Fatal(err)
			}
			checkEvents(t, "resend", b.Events, []want{tt.want})
		})
	}
}

// svix-signature may list several signatures (a secret being rotated):
// one match is enough.
func TestResendSeveralSignatures(t *testing.T) {
	t.Parallel()
	body := fixture(t, "resend/email.sent.json")
	h := svixHeader(t, resendSecret, "msg_1", testNow, body)
	h.Set("svix-signature", "v1,"+base64.StdEncoding.EncodeToString(make([]byte, 32))+" v1a,abc "+h.Get("svix-signature"))
	if _, err := newResend(t).Parse(context.Background(), h, body, testNow); err != nil {
		t.Fatal(err)
	}
}

func TestResendRefuses(t *testing.T) {
	t.Parallel()
	r := newResend(t)
	body := fixture(t, "resend/email.bounced.json")
	other := "whsec_" + base64.StdEncoding.EncodeToString([]byte("fedcba9876543210fedcba9876543210"))
	tests := []struct {
		name   string
		header http.Header
		body   []byte
		err    error
	}{
		{"unsigned", jsonHeader(), body, webhook.ErrSignature},
		{"other secret", svixHeader(t, other, "msg_1", testNow, body), body, webhook.ErrSignature},
		{"body changed", svixHeader(t, resendSecret, "msg_1", testNow, body), append(body, ' '), webhook.ErrSignature},
		{"id changed", func() http.Header {
			h := svixHeader(t, resendSecret, "msg_1", testNow, body)
			h.Set("svix-id", "msg_2")
			return h
		}(), body, webhook.ErrSignature},
		{"replayed", svixHeader(t, resendSecret, "msg_1", testNow.Add(-6*time.Minute), body), body, webhook.ErrSignature},
		{"future", svixHeader(t, resendSecret, "msg_1", testNow.Add(6*time.Minute), body), body, webhook.ErrSignature},
		{"only another scheme", func() http.Header {
			h := svixHeader(t, resendSecret, "msg_1", testNow, body)
			h.Set("svix-signature", strings.Replace(h.Get("svix-signature"), "v1,", "v2,", 1))
			return h
		}(), body, webhook.ErrSignature},
		{"wrong content type", func() http.Header {
			h := svixHeader(t, resendSecret, "msg_1", testNow, body)
			h.Set("Content-Type", "text/plain")
			return h
		}(), body, webhook.ErrContentType},
		{"not JSON", svixHeader(t, resendSecret, "msg_1", testNow, []byte("x")), []byte("x"), webhook.ErrPayload},
		{"no type", svixHeader(t, resendSecret, "msg_1", testNow, []byte("{}")), []byte("{}"), webhook.ErrPayload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := r.Parse(context.Background(), tt.header, tt.body, testNow)
			checkErr(t, err, tt.err, resendSecret, "delivered@resend.dev")
		})
	}
}

func TestNewResendRefusesMalformedSecrets(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "\n", "c2VjcmV0c2VjcmV0c2VjcmV0", "whsec_!!!!", "whsec_c2hvcnQ="} {
		_, err := webhook.NewResend([]byte(s), 0)
		if err == nil {
			t.Errorf("%q accepted", s)
		} else if len(s) > 8 && strings.Contains(err.Error(), s[len(s)-6:]) {
			t.Errorf("error %q quotes the secret", err)
		}
	}
	if s := fmt.Sprintf("%#v", newResend(t)); strings.Contains(s, "whsec") || strings.Contains(s, "MDEy") {
		t.Errorf("%%#v shows the secret: %s", s)
	}
}

// The test vector Svix publishes (and the Standard Webhooks specification
// repeats): its secret verifies its signature of its payload, and nothing
// else.
func TestResendSvixVector(t *testing.T) {
	t.Parallel()
	r, err := webhook.NewResend([]byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), 0)
	if err != nil {
		t.Fatal(err)
	}
	h := jsonHeader()
	h.Set("svix-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("svix-timestamp", "1614265330")
	h.Set("svix-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	now := time.Unix(1614265330, 0)
	// Verified, then refused as a payload: the vector is no Resend event.
	_, err = r.Parse(context.Background(), h, []byte(`{"test": 2432232314}`), now)
	checkErr(t, err, webhook.ErrPayload)
	_, err = r.Parse(context.Background(), h, []byte(`{"test": 2432232315}`), now)
	checkErr(t, err, webhook.ErrSignature)
}
