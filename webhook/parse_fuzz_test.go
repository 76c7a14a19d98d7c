package webhook_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// The fuzz targets sign what the fuzzer makes (when sign is true), so
// that the parsing behind each signature check is reached; unsigned,
// they exercise the checks themselves. Every input must give events or
// an error of the contract, never a panic (checkParseInvariants).

// seedFixtures adds every fixture under testdata/dir as a seed.
func seedFixtures(f *testing.F, dir string, add func(body []byte)) {
	f.Helper()
	names, err := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
	if err != nil || len(names) == 0 {
		f.Fatalf("no fixtures in %s: %v", dir, err)
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		add(b)
	}
}

func FuzzPostmark(f *testing.F) {
	seedFixtures(f, "postmark", func(b []byte) { f.Add(b, "application/json", true) })
	f.Add([]byte(`{"RecordType":"Bounce","ID":-1,"BouncedAt":"0000-00-00"}`), "application/json", true)
	f.Add([]byte(`{`), "text/plain", false)
	p := newPostmark(f)
	f.Fuzz(func(t *testing.T, body []byte, contentType string, auth bool) {
		h := http.Header{"Content-Type": {contentType}}
		if auth {
			h = postmarkHeader("digest-hook", "s3cret-Pa55")
			h.Set("Content-Type", contentType)
		}
		b, err := p.Parse(context.Background(), h, body, testNow)
		checkParseInvariants(t, "postmark", b, err)
	})
}

func FuzzSES(f *testing.F) {
	seedFixtures(f, "ses", func(b []byte) { f.Add(b, "1", true) })
	f.Add([]byte(`{"eventType":"Bounce","mail":{}}`), "2", true)
	f.Add([]byte(`{"notificationType":"Complaint","complaint":{"timestamp":"x"}}`), "2", true)
	s := newSES(f, &snsTransport{fail: true}, testSNS().certPEM)
	f.Fuzz(func(t *testing.T, message []byte, version string, sign bool) {
		var body []byte
		if sign {
			body = testSNS().sign(t, snsEnvelope(t, message, version))
		} else {
			body = message
		}
		b, err := s.Parse(context.Background(), snsHeader(), body, testNow)
		checkParseInvariants(t, "ses", b, err)
	})
}

func FuzzSendGrid(f *testing.F) {
	seedFixtures(f, "sendgrid", func(b []byte) { f.Add(b, true) })
	f.Add([]byte(`[{"timestamp":1e99,"digest_key":{"a":1}}]`), true)
	f.Add([]byte(`[{"timestamp":"-1"}]`), false)
	s := newSendGrid(f)
	f.Fuzz(func(t *testing.T, body []byte, sign bool) {
		h := jsonHeader()
		if sign {
			h = sendGridHeader(t, testSendGridKey(), testNow, body)
		}
		b, err := s.Parse(context.Background(), h, body, testNow)
		checkParseInvariants(t, "sendgrid", b, err)
	})
}

func FuzzMailgun(f *testing.F) {
	seedFixtures(f, "mailgun", func(b []byte) { f.Add(b, true) })
	f.Add([]byte(`{"timestamp":"1.9999999999","user-variables":"x"}`), true)
	f.Add([]byte(`{"signature":{"timestamp":1}}`), false)
	m := newMailgun(f)
	f.Fuzz(func(t *testing.T, data []byte, sign bool) {
		body := data
		if sign {
			if !json.Valid(data) {
				data = []byte("null")
			}
			body = mailgunBody(t, mailgunKey, testNow, mailgunToken, data)
		}
		b, err := m.Parse(context.Background(), jsonHeader(), body, testNow)
		checkParseInvariants(t, "mailgun", b, err)
	})
}

func FuzzResend(f *testing.F) {
	seedFixtures(f, "resend", func(b []byte) { f.Add(b, "msg_1", true) })
	f.Add([]byte(`{"type":"email.bounced","data":{"tags":[1],"headers":"x","bounce":null}}`), "", true)
	r := newResend(f)
	f.Fuzz(func(t *testing.T, body []byte, id string, sign bool) {
		h := jsonHeader()
		if sign {
			h = svixHeader(t, resendSecret, id, testNow, body)
		}
		b, err := r.Parse(context.Background(), h, body, testNow)
		checkParseInvariants(t, "resend", b, err)
	})
}
