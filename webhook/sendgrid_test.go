package webhook_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weeklydigest/digest/webhook"
)

var testSendGridKey = sync.OnceValue(func() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
})

// sendGridPublicKey is the verification key as SendGrid shows it.
func sendGridPublicKey(t testing.TB, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(base64.StdEncoding.EncodeToString(der))
}

// sendGridHeader signs timestamp+body as SendGrid does.
func sendGridHeader(t testing.TB, k *ecdsa.PrivateKey, at time.Time, body []byte) http.Header {
	t.Helper()
	ts := strconv.FormatInt(at.Unix(), 10)
	sum := sha256.Sum256(append([]byte(ts), body...))
	sig, err := ecdsa.SignASN1(rand.Reader, k, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	h := jsonHeader()
	h.Set(webhook.SendGridSignatureHeader, base64.StdEncoding.EncodeToString(sig))
	h.Set(webhook.SendGridTimestampHeader, ts)
	return h
}

func newSendGrid(t testing.TB) *webhook.SendGrid {
	t.Helper()
	s, err := webhook.NewSendGrid(sendGridPublicKey(t, testSendGridKey()), 0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSendGridFixture(t *testing.T) {
	t.Parallel()
	var events []map[string]any
	if err := json.Unmarshal(fixture(t, "sendgrid/events.json"), &events); err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		e[webhook.CustomArg] = string(testKey) // X-SMTPAPI unique_args come back as fields
	}
	events[1][webhook.CustomArg] = 42 // not a key: no key
	body, _ := json.Marshal(events)
	b, err := newSendGrid(t).Parse(context.Background(), sendGridHeader(t, testSendGridKey(), testNow, body), body, testNow)
	if err != nil {
		t.Fatal(err)
	}
	at := "2017-12-15T00:59:29Z"
	a := "example@test.com"
	checkEvents(t, "sendgrid", b.Events, []want{
		{webhook.KindAccepted, testKey, a, at, ""},
		{webhook.KindOther, "", a, at, "deferred"},
		{webhook.KindDelivered, testKey, a, at, ""},
		{webhook.KindOther, testKey, a, at, "open"},
		{webhook.KindOther, testKey, a, at, "click"},
		{webhook.KindHardBounce, testKey, a, at, "bounce 5.0.0"},
		{webhook.KindSoftBounce, testKey, a, at, "blocked 5.7.1"},
		{webhook.KindHardBounce, testKey, a, at, "dropped Bounced Address"},
		{webhook.KindComplaint, testKey, a, at, ""},
		{webhook.KindUnsubscribe, testKey, a, at, "unsubscribe"},
		{webhook.KindUnsubscribe, testKey, a, at, "group_unsubscribe"},
		{webhook.KindOther, testKey, a, at, "group_resubscribe"},
	})
	if b.Events[0].ID != "sg_event_id_processed" {
		t.Errorf("id %q: want sg_event_id", b.Events[0].ID)
	}
}

func TestSendGridDropReasons(t *testing.T) {
	t.Parallel()
	for reason, kind := range map[string]webhook.Kind{
		"Bounced Address": webhook.KindHardBounce, "Invalid": webhook.KindHardBounce,
		"Spam Reporting Address": webhook.KindComplaint, "Unsubscribed Address": webhook.KindUnsubscribe,
		"Spam Content (if spam checker app enabled)": webhook.KindOther, "Recipient List over Package Quota": webhook.KindOther,
	} {
		body, _ := json.Marshal([]map[string]any{{"email": "a@example.com", "timestamp": 1513299569, "event": "dropped", "reason": reason, "sg_event_id": "x"}})
		b, err := newSendGrid(t).Parse(context.Background(), sendGridHeader(t, testSendGridKey(), testNow, body), body, testNow)
		if err != nil {
			t.Fatal(err)
		}
		if b.Events[0].Kind != kind {
			t.Errorf("%s: %s, want %s", reason, b.Events[0].Kind, kind)
		}
	}
}

// The vector of SendGrid's own Go library (helpers/eventwebhook): its
// public key verifies its signature of its payload, and nothing else.
func TestSendGridLibraryVector(t *testing.T) {
	t.Parallel()
	const (
		publicKey = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=="
		timestamp = "1588788367"
		signature = "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0="
		payload   = `{"category":"example_payload","event":"test_event","message_id":"message_id"}`
	)
	s, err := webhook.NewSendGrid([]byte(publicKey), 0)
	if err != nil {
		t.Fatal(err)
	}
	h := jsonHeader()
	h.Set(webhook.SendGridSignatureHeader, signature)
	h.Set(webhook.SendGridTimestampHeader, timestamp)
	now := time.Unix(1588788367, 0)
	// Verified, then refused as a payload: the vector is one object, not
	// the batch (an array) the webhook posts.
	_, err = s.Parse(context.Background(), h, []byte(payload), now)
	checkErr(t, err, webhook.ErrPayload)
	_, err = s.Parse(context.Background(), h, []byte(payload+" "), now)
	checkErr(t, err, webhook.ErrSignature)
	h.Set(webhook.SendGridTimestampHeader, "1588788368")
	_, err = s.Parse(context.Background(), h, []byte(payload), now)
	checkErr(t, err, webhook.ErrSignature)
}

func TestSendGridRefuses(t *testing.T) {
	t.Parallel()
	s := newSendGrid(t)
	body := fixture(t, "sendgrid/events.json")
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tests := []struct {
		name   string
		header http.Header
		body   []byte
		err    error
	}{
		{"unsigned", jsonHeader(), body, webhook.ErrSignature},
		{"other key", sendGridHeader(t, other, testNow, body), body, webhook.ErrSignature},
		{"body changed", sendGridHeader(t, testSendGridKey(), testNow, body), append([]byte(" "), body...), webhook.ErrSignature},
		{"replayed", sendGridHeader(t, testSendGridKey(), testNow.Add(-6*time.Minute), body), body, webhook.ErrSignature},
		{"future", sendGridHeader(t, testSendGridKey(), testNow.Add(6*time.Minute), body), body, webhook.ErrSignature},
		{"signature not base64", func() http.Header {
			h := sendGridHeader(t, testSendGridKey(), testNow, body)
			h.Set(webhook.SendGridSignatureHeader, "!!")
			return h
		}(), body, webhook.ErrSignature},
		{"wrong content type", func() http.Header {
			h := sendGridHeader(t, testSendGridKey(), testNow, body)
			h.Set("Content-Type", "text/html")
			return h
		}(), body, webhook.ErrContentType},
		{"not an array", sendGridHeader(t, testSendGridKey(), testNow, []byte(`{}`)), []byte(`{}`), webhook.ErrPayload},
		{"bad timestamp", sendGridHeader(t, testSendGridKey(), testNow, []byte(`[{"timestamp":"soon"}]`)), []byte(`[{"timestamp":"soon"}]`), webhook.ErrPayload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := s.Parse(context.Background(), tt.header, tt.body, testNow)
			checkErr(t, err, tt.err, "example@test.com")
		})
	}
}

func TestNewSendGridRefusesMalformedKeys(t *testing.T) {
	t.Parallel()
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 1024)
	rsaDER, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384DER, _ := x509.MarshalPKIXPublicKey(&p384.PublicKey)
	for _, k := range []string{"", "\n", "Zm9v%%%%%%%%%%", base64.StdEncoding.EncodeToString([]byte("not DER")),
		base64.StdEncoding.EncodeToString(rsaDER), base64.StdEncoding.EncodeToString(p384DER)} {
		_, err := webhook.NewSendGrid([]byte(k), 0)
		if err == nil {
			t.Errorf("%q accepted", k)
		} else if len(k) > 8 && strings.Contains(err.Error(), k[:8]) {
			t.Errorf("error %q quotes the key", err)
		}
	}
}
