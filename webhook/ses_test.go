package webhook_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weeklydigest/digest/webhook"
)

const (
	testTopic   = "arn:aws:sns:us-west-2:123456789012:MyTopic"
	testCertURL = "https://sns.us-west-2.amazonaws.com/SimpleNotificationService-f3ecfb7224c7233fe7bb5f59f96de52f.pem"
)

// snsSigner signs SNS messages as SNS does, with a key and certificate
// made for the test.
type snsSigner struct {
	key     *rsa.PrivateKey
	certPEM []byte
}

var testSNS = sync.OnceValue(func() *snsSigner { return newSNSSigner(testNow.Add(-time.Hour), testNow.Add(time.Hour)) })

func newSNSSigner(notBefore, notAfter time.Time) *snsSigner {
	// 1024 bits: the smallest Go allows, quick to make and use in the
	// fuzz workers; SNS's own keys are longer, which changes nothing here.
	key, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "sns.amazonaws.com"},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return &snsSigner{key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// sign fills m's Signature for its SignatureVersion ("1" or "2") over the
// canonical string the SNS documentation gives, and returns the body.
func (s *snsSigner) sign(t testing.TB, m map[string]string) []byte {
	t.Helper()
	fields := []string{"Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"}
	if m["Type"] != "Notification" {
		fields = []string{"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"}
	}
	var canon strings.Builder
	for _, f := range fields {
		if v, ok := m[f]; ok {
			canon.WriteString(f + "\n" + v + "\n")
		}
	}
	var sig []byte
	var err error
	if m["SignatureVersion"] == "2" {
		sum := sha256.Sum256([]byte(canon.String()))
		sig, err = rsa.SignPKCS1v15(nil, s.key, crypto.SHA256, sum[:])
	} else {
		sum := sha1.Sum([]byte(canon.String()))
		sig, err = rsa.SignPKCS1v15(nil, s.key, crypto.SHA1, sum[:])
	}
	if err != nil {
		t.Fatal(err)
	}
	m["Signature"] = base64.StdEncoding.EncodeToString(sig)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// snsEnvelope is the documented notification envelope around message,
// published now.
func snsEnvelope(t testing.TB, message []byte, version string) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal(fixture(t, "ses/sns-notification.json"), &m); err != nil {
		t.Fatal(err)
	}
	m["Message"] = string(message)
	m["Timestamp"] = testNow.Add(-time.Minute).Format("2006-01-02T15:04:05.000Z")
	m["SignatureVersion"] = version
	return m
}

// snsTransport is AWS as the tests see it: it serves the signing
// certificate at testCertURL and answers subscribe URLs, and records the
// URLs asked for.
type snsTransport struct {
	cert []byte
	fail bool

	mu   sync.Mutex
	urls []string
}

func (tr *snsTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	tr.mu.Lock()
	tr.urls = append(tr.urls, r.URL.String())
	tr.mu.Unlock()
	if tr.fail {
		return nil, errors.New("connection refused")
	}
	body, status := "", http.StatusNotFound
	switch {
	case r.URL.String() == testCertURL:
		body, status = string(tr.cert), http.StatusOK
	case r.URL.Query().Get("Action") == "ConfirmSubscription":
		body, status = "<ConfirmSubscriptionResponse/>", http.StatusOK
	}
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Body: io.NopCloser(strings.NewReader(body)), Header: http.Header{}, Request: r}, nil
}

func (tr *snsTransport) requested() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.urls...)
}

func newSES(t testing.TB, tr http.RoundTripper, pinned []byte) *webhook.SES {
	t.Helper()
	s, err := webhook.NewSES(webhook.SESConfig{Topics: []string{testTopic}, Certificates: pinned, Client: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func snsHeader() http.Header { return http.Header{"Content-Type": {"text/plain; charset=UTF-8"}} }

// sesWithHeaderKey adds the key header to the documented mail headers.
func sesWithHeaderKey(t testing.TB, name string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(fixture(t, name), &m); err != nil {
		t.Fatal(err)
	}
	mail := m["mail"].(map[string]any)
	headers, _ := mail["headers"].([]any)
	mail["headers"] = append(headers, map[string]any{"name": "X-Digest-Key", "value": string(testKey)})
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSESFixtures(t *testing.T) {
	t.Parallel()
	tag, _ := webhook.TagValue(testKey)
	tests := []struct {
		name    string
		message []byte
		want    []want
	}{
		{"notification bounce", sesWithHeaderKey(t, "ses/notification-bounce.json"), []want{{webhook.KindHardBounce, testKey, "jane@example.com", "2016-01-27T14:59:38.237Z", "Permanent General 5.1.1"}}},
		{"transient bounce", withField(t, sesWithHeaderKey(t, "ses/notification-bounce.json"), "Transient", "bounce", "bounceType"), []want{{webhook.KindSoftBounce, testKey, "jane@example.com", "", "Transient General 5.1.1"}}},
		{"undetermined bounce", withField(t, fixture(t, "ses/notification-bounce.json"), "Undetermined", "bounce", "bounceType"), []want{{webhook.KindSoftBounce, "", "jane@example.com", "", "Undetermined General 5.1.1"}}},
		{"notification complaint", sesWithHeaderKey(t, "ses/notification-complaint.json"), []want{{webhook.KindComplaint, testKey, "richard@example.com", "2016-01-27T14:59:38.237Z", "abuse"}}},
		{"notification delivery", sesWithHeaderKey(t, "ses/notification-delivery.json"), []want{{webhook.KindDelivered, testKey, "jane@example.com", "2016-01-27T14:59:38.237Z", ""}}},
		{"event bounce, key in a tag", withField(t, fixture(t, "ses/event-bounce.json"), []string{tag}, "mail", "tags", webhook.TagName), []want{{webhook.KindHardBounce, testKey, "recipient@example.com", "2017-08-05T00:41:02.669Z", "Permanent General 5.1.1"}}},
		{"event send, key in a tag", withField(t, fixture(t, "ses/event-send.json"), []string{tag}, "mail", "tags", webhook.TagName), []want{{webhook.KindAccepted, testKey, "recipient@example.com", "2016-10-14T05:02:16.645Z", ""}}},
		{"event send without key", fixture(t, "ses/event-send.json"), []want{{webhook.KindAccepted, "", "recipient@example.com", "", ""}}},
		{"delivery delay", fixture(t, "ses/event-delivery-delay.json"), []want{{webhook.KindOther, "", "", "", "DeliveryDelay"}}},
	}
	tr := &snsTransport{cert: testSNS().certPEM}
	s := newSES(t, tr, nil)
	for _, tt := range tests {
		for _, version := range []string{"1", "2"} {
			t.Run(tt.name+" v"+version, func(t *testing.T) {
				t.Parallel()
				body := testSNS().sign(t, snsEnvelope(t, tt.message, version))
				b, err := s.Parse(context.Background(), snsHeader(), body, testNow)
				if err != nil {
					t.Fatal(err)
				}
				checkEvents(t, "ses", b.Events, tt.want)
			})
		}
	}
}

// The certificate is fetched from SigningCertURL once, and never from a
// URL that is not https on an SNS host.
func TestSESCertificateURL(t *testing.T) {
	t.Parallel()
	tr := &snsTransport{cert: testSNS().certPEM}
	s := newSES(t, tr, nil)
	msg := fixture(t, "ses/event-send.json")
	for range 3 {
		if _, err := s.Parse(context.Background(), snsHeader(), testSNS().sign(t, snsEnvelope(t, msg, "1")), testNow); err != nil {
			t.Fatal(err)
		}
	}
	if got := tr.requested(); len(got) != 1 || got[0] != testCertURL {
		t.Errorf("requested %v, want the certificate once", got)
	}
	for _, u := range []string{
		"http://sns.us-west-2.amazonaws.com/cert.pem",
		"https://sns.us-west-2.amazonaws.com.evil.example/cert.pem",
		"https://evil.example/sns.us-west-2.amazonaws.com/cert.pem",
		"https://sns.us-west-2.amazonaws.com:8443/cert.pem",
		"https://user@sns.us-west-2.amazonaws.com/cert.pem",
		"https://s3.us-west-2.amazonaws.com/cert.pem",
		"//sns.us-west-2.amazonaws.com/cert.pem",
		"https://sns.us-west-2.amazonaws.com/?Action=Unsubscribe",
		"https://sns.us-west-2.amazonaws.com/SimpleNotificationService-f3.pem?x=1",
		"https://sns.us-west-2.amazonaws.com/../SimpleNotificationService-f3.pem",
		"",
	} {
		tr := &snsTransport{cert: testSNS().certPEM}
		s := newSES(t, tr, nil)
		m := snsEnvelope(t, msg, "1")
		m["SigningCertURL"] = u
		_, err := s.Parse(context.Background(), snsHeader(), testSNS().sign(t, m), testNow)
		checkErr(t, err, webhook.ErrSignature)
		if got := tr.requested(); len(got) != 0 {
			t.Errorf("%q: requested %v", u, got)
		}
	}
	// China's partition.
	tr = &snsTransport{cert: testSNS().certPEM}
	s = newSES(t, tr, nil)
	m := snsEnvelope(t, msg, "2")
	m["SigningCertURL"] = "https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-0123abcd.pem"
	_, err := s.Parse(context.Background(), snsHeader(), testSNS().sign(t, m), testNow)
	checkErr(t, err, webhook.ErrUnavailable) // fetched (the test's AWS answers 404)
	if got := tr.requested(); len(got) != 1 {
		t.Errorf("requested %v", got)
	}
}

func TestSESPinnedCertificate(t *testing.T) {
	t.Parallel()
	tr := &snsTransport{fail: true}
	s := newSES(t, tr, testSNS().certPEM)
	m := snsEnvelope(t, fixture(t, "ses/event-send.json"), "2")
	m["SigningCertURL"] = "https://evil.example/cert.pem"
	if _, err := s.Parse(context.Background(), snsHeader(), testSNS().sign(t, m), testNow); err != nil {
		t.Fatal(err)
	}
	other := newSNSSigner(testNow.Add(-time.Hour), testNow.Add(time.Hour))
	_, err := s.Parse(context.Background(), snsHeader(), other.sign(t, snsEnvelope(t, fixture(t, "ses/event-send.json"), "2")), testNow)
	checkErr(t, err, webhook.ErrSignature)
	if got := tr.requested(); len(got) != 0 {
		t.Errorf("requested %v with a pinned certificate", got)
	}
}

func TestSESRefuses(t *testing.T) {
	t.Parallel()
	msg := fixture(t, "ses/notification-bounce.json")
	expired := newSNSSigner(testNow.Add(-48*time.Hour), testNow.Add(-24*time.Hour))
	tests := []struct {
		name   string
		header http.Header
		body   func(t *testing.T) []byte
		signer *snsSigner
		fail   bool
		err    error
	}{
		{"topic not allowed", snsHeader(), func(t *testing.T) []byte {
			m := snsEnvelope(t, msg, "1")
			m["TopicArn"] = "arn:aws:sns:us-west-2:123456789012:Other"
			return testSNS().sign(t, m)
		}, nil, false, webhook.ErrSignature},
		{"message changed after signing", snsHeader(), func(t *testing.T) []byte {
			return bytes.Replace(testSNS().sign(t, snsEnvelope(t, msg, "1")), []byte(`Permanent`), []byte(`Transient`), 1)
		}, nil, false, webhook.ErrSignature},
		{"subject removed after signing", snsHeader(), func(t *testing.T) []byte {
			var m map[string]string
			_ = json.Unmarshal(testSNS().sign(t, snsEnvelope(t, msg, "1")), &m)
			delete(m, "Subject")
			b, _ := json.Marshal(m)
			return b
		}, nil, false, webhook.ErrSignature},
		{"version 1 signature labelled 2", snsHeader(), func(t *testing.T) []byte {
			b := testSNS().sign(t, snsEnvelope(t, msg, "1"))
			return bytes.Replace(b, []byte(`"SignatureVersion":"1"`), []byte(`"SignatureVersion":"2"`), 1)
		}, nil, false, webhook.ErrSignature},
		{"unknown signature version", snsHeader(), func(t *testing.T) []byte { return testSNS().sign(t, snsEnvelope(t, msg, "3")) }, nil, false, webhook.ErrSignature},
		{"signed by another key", snsHeader(), func(t *testing.T) []byte {
			return newSNSSigner(testNow.Add(-time.Hour), testNow.Add(time.Hour)).sign(t, snsEnvelope(t, msg, "1"))
		}, nil, false, webhook.ErrSignature},
		{"expired certificate", snsHeader(), func(t *testing.T) []byte { return expired.sign(t, snsEnvelope(t, msg, "1")) }, expired, false, webhook.ErrSignature},
		{"replayed after the tolerance", snsHeader(), func(t *testing.T) []byte {
			m := snsEnvelope(t, msg, "1")
			m["Timestamp"] = testNow.Add(-6 * time.Minute).Format(time.RFC3339)
			return testSNS().sign(t, m)
		}, nil, false, webhook.ErrSignature},
		{"from the future", snsHeader(), func(t *testing.T) []byte {
			m := snsEnvelope(t, msg, "1")
			m["Timestamp"] = testNow.Add(6 * time.Minute).Format(time.RFC3339)
			return testSNS().sign(t, m)
		}, nil, false, webhook.ErrSignature},
		{"certificate unreachable", snsHeader(), func(t *testing.T) []byte { return testSNS().sign(t, snsEnvelope(t, msg, "1")) }, nil, true, webhook.ErrUnavailable},
		{"form", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, func(t *testing.T) []byte { return testSNS().sign(t, snsEnvelope(t, msg, "1")) }, nil, false, webhook.ErrContentType},
		{"not JSON", snsHeader(), func(*testing.T) []byte { return []byte("Type=Notification") }, nil, false, webhook.ErrPayload},
		{"SES message not JSON", snsHeader(), func(t *testing.T) []byte { return testSNS().sign(t, snsEnvelope(t, []byte("Hello world!"), "1")) }, nil, false, webhook.ErrPayload},
		{"SES message without a type", snsHeader(), func(t *testing.T) []byte { return testSNS().sign(t, snsEnvelope(t, []byte(`{"mail":{}}`), "1")) }, nil, false, webhook.ErrPayload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			signer := tt.signer
			if signer == nil {
				signer = testSNS()
			}
			s := newSES(t, &snsTransport{cert: signer.certPEM, fail: tt.fail}, nil)
			_, err := s.Parse(context.Background(), tt.header, tt.body(t), testNow)
			checkErr(t, err, tt.err, "jane@example.com")
		})
	}
}

func TestSESSubscriptionConfirmation(t *testing.T) {
	t.Parallel()
	var m map[string]string
	if err := json.Unmarshal(fixture(t, "ses/sns-subscription-confirmation.json"), &m); err != nil {
		t.Fatal(err)
	}
	m["Timestamp"] = testNow.Format(time.RFC3339)
	for _, version := range []string{"1", "2"} {
		m["SignatureVersion"] = version
		tr := &snsTransport{cert: testSNS().certPEM}
		s := newSES(t, tr, nil)
		b, err := s.Parse(context.Background(), snsHeader(), testSNS().sign(t, m), testNow)
		if err != nil {
			t.Fatal(err)
		}
		if b.Confirm == nil || len(b.Events) != 0 {
			t.Fatalf("batch %+v: want a Confirm and no events", b)
		}
		if got := tr.requested(); len(got) != 1 {
			t.Fatalf("requested %v before Confirm: want the certificate only", got)
		}
		if err := b.Confirm(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := tr.requested(); len(got) != 2 || got[1] != m["SubscribeURL"] {
			t.Errorf("requested %v: want the SubscribeURL last", got)
		}
	}

	// A SubscribeURL elsewhere is refused before anything is fetched
	// from it.
	m["SubscribeURL"] = "https://evil.example/?Action=ConfirmSubscription"
	tr := &snsTransport{cert: testSNS().certPEM}
	_, err := newSES(t, tr, nil).Parse(context.Background(), snsHeader(), testSNS().sign(t, m), testNow)
	checkErr(t, err, webhook.ErrPayload)
	for _, u := range tr.requested() {
		if u != testCertURL {
			t.Errorf("requested %s", u)
		}
	}

	// A confirmation that AWS refuses is an error of Confirm.
	m["SubscribeURL"] = "https://sns.us-west-2.amazonaws.com/?Action=Other"
	b, err := newSES(t, &snsTransport{cert: testSNS().certPEM}, nil).Parse(context.Background(), snsHeader(), testSNS().sign(t, m), testNow)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Confirm(context.Background()); err == nil {
		t.Error("Confirm answered 404: want an error")
	}

	// UnsubscribeConfirmation: verified, nothing to do.
	m["Type"] = "UnsubscribeConfirmation"
	b, err = newSES(t, &snsTransport{cert: testSNS().certPEM}, nil).Parse(context.Background(), snsHeader(), testSNS().sign(t, m), testNow)
	if err != nil || b.Confirm != nil || len(b.Events) != 0 {
		t.Errorf("unsubscribe confirmation: %+v, %v", b, err)
	}
}

// A notification published without a subject is signed without the
// Subject field.
func TestSESWithoutSubject(t *testing.T) {
	t.Parallel()
	s := newSES(t, &snsTransport{fail: true}, testSNS().certPEM)
	m := snsEnvelope(t, fixture(t, "ses/event-send.json"), "2")
	delete(m, "Subject")
	b, err := s.Parse(context.Background(), snsHeader(), testSNS().sign(t, m), testNow)
	if err != nil || len(b.Events) != 1 {
		t.Fatalf("%+v, %v", b, err)
	}
}

func TestNewSESRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []webhook.SESConfig{
		{},
		{Topics: []string{"MyTopic"}},
		{Topics: []string{testTopic}, Certificates: []byte("not PEM")},
		{Topics: []string{testTopic}, Certificates: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")})},
	} {
		if _, err := webhook.NewSES(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// Several recipients of one SES message are several events with distinct
// IDs; the same message parsed again gives the same IDs.
func TestSESEventIDs(t *testing.T) {
	t.Parallel()
	msg := withField(t, fixture(t, "ses/notification-bounce.json"), []map[string]string{
		{"emailAddress": "jane@example.com", "status": "5.1.1"},
		{"emailAddress": "mary@example.com", "status": "5.1.1"},
	}, "bounce", "bouncedRecipients")
	s := newSES(t, &snsTransport{cert: testSNS().certPEM}, nil)
	var ids []string
	for range 2 {
		b, err := s.Parse(context.Background(), snsHeader(), testSNS().sign(t, snsEnvelope(t, msg, "1")), testNow)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Events) != 2 {
			t.Fatalf("%d events", len(b.Events))
		}
		ids = append(ids, b.Events[0].ID, b.Events[1].ID)
	}
	if ids[0] == ids[1] || ids[0] != ids[2] || ids[1] != ids[3] {
		t.Errorf("ids %v", ids)
	}
}
