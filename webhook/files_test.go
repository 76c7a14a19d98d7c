package webhook_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/webhook"
)

// writeFile writes content to a file in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFromFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := webhook.Files{
		PostmarkCredentials: writeFile(t, dir, "postmark", postmarkCredentials+"\n"),
		SESCertificates:     writeFile(t, dir, "ses.pem", string(testSNS().certPEM)),
		SendGridPublicKey:   writeFile(t, dir, "sendgrid", string(sendGridPublicKey(t, testSendGridKey()))+"\n"),
		MailgunSigningKey:   writeFile(t, dir, "mailgun", mailgunKey),
		ResendSecret:        writeFile(t, dir, "resend", resendSecret),
	}
	ps, err := webhook.FromFiles(f, webhook.Options{SESTopics: []string{testTopic}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range ps {
		names = append(names, p.Name())
	}
	if got := strings.Join(names, " "); got != "postmark ses sendgrid mailgun resend" {
		t.Errorf("providers %s", got)
	}

	// Only what is configured.
	ps, err = webhook.FromFiles(webhook.Files{MailgunSigningKey: f.MailgunSigningKey}, webhook.Options{})
	if err != nil || len(ps) != 1 || ps[0].Name() != "mailgun" {
		t.Errorf("mailgun only: %v, %v", ps, err)
	}
	ps, err = webhook.FromFiles(webhook.Files{}, webhook.Options{SESTopics: []string{testTopic}})
	if err != nil || len(ps) != 1 || ps[0].Name() != "ses" {
		t.Errorf("ses by its topic only: %v, %v", ps, err)
	}
	ps, err = webhook.FromFiles(webhook.Files{}, webhook.Options{})
	if err != nil || len(ps) != 0 {
		t.Errorf("nothing configured: %v, %v", ps, err)
	}
}

// Each bad file is named, with what is wrong, in one error; no secret is
// quoted.
func TestFromFilesRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := webhook.Files{
		PostmarkCredentials: writeFile(t, dir, "postmark", "digest-hook-without-colon-Secret1"),
		SESCertificates:     writeFile(t, dir, "ses.pem", "-----BEGIN CERTIFICATE-----\nU2VjcmV0Mg==\n-----END CERTIFICATE-----\n"),
		SendGridPublicKey:   writeFile(t, dir, "sendgrid", "Secret3Secret3"),
		MailgunSigningKey:   writeFile(t, dir, "mailgun", ""),
		ResendSecret:        writeFile(t, dir, "resend", "Secret5-not-whsec"),
	}
	_, err := webhook.FromFiles(f, webhook.Options{SESTopics: []string{testTopic}})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, p := range []string{f.PostmarkCredentials, f.SESCertificates, f.SendGridPublicKey, f.MailgunSigningKey, f.ResendSecret} {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error does not name %s: %v", p, err)
		}
	}
	for _, s := range []string{"Secret1", "U2VjcmV0Mg", "Secret3", "Secret5"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error quotes %s: %v", s, err)
		}
	}
	for _, bad := range []webhook.Files{
		{ResendSecret: filepath.Join(dir, "missing")},
		{ResendSecret: dir},
		{PostmarkCredentials: writeFile(t, dir, "big", strings.Repeat("a", 1<<17)+":b")},
	} {
		if _, err := webhook.FromFiles(bad, webhook.Options{}); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if _, err := webhook.FromFiles(webhook.Files{SESCertificates: f.SESCertificates}, webhook.Options{}); err == nil {
		t.Error("ses certificates without a topic accepted")
	}
}

// Package webhook reads requests and keys: it imports the domain and the
// standard library only, so the intake (and nothing else) decides what
// is stored.
func TestWebhookImportsOnlyTheDomain(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(strings.Split(p, "/")[0], ".") && p != "github.com/weeklydigest/digest/digest" {
			t.Errorf("webhook imports %s", p)
		}
	}
}

// Options.Tolerance reaches the providers: a request 6 minutes old is
// refused by default and accepted under a 10-minute tolerance.
func TestFromFilesTolerance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := webhook.Files{
		SendGridPublicKey: writeFile(t, dir, "sendgrid", string(sendGridPublicKey(t, testSendGridKey()))),
		MailgunSigningKey: writeFile(t, dir, "mailgun", mailgunKey),
		ResendSecret:      writeFile(t, dir, "resend", resendSecret),
	}
	old := testNow.Add(-6 * time.Minute)
	sg := fixture(t, "sendgrid/events.json")
	mg := mailgunBody(t, mailgunKey, old, mailgunToken, fixture(t, "mailgun/delivered.json"))
	rs := fixture(t, "resend/email.sent.json")
	requests := map[string]func() (http.Header, []byte){
		"sendgrid": func() (http.Header, []byte) { return sendGridHeader(t, testSendGridKey(), old, sg), sg },
		"mailgun":  func() (http.Header, []byte) { return jsonHeader(), mg },
		"resend":   func() (http.Header, []byte) { return svixHeader(t, resendSecret, "msg_1", old, rs), rs },
	}
	for _, tc := range []struct {
		tolerance time.Duration
		ok        bool
	}{{0, false}, {10 * time.Minute, true}} {
		ps, err := webhook.FromFiles(f, webhook.Options{Tolerance: tc.tolerance})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			h, body := requests[p.Name()]()
			_, err := p.Parse(context.Background(), h, body, testNow)
			if (err == nil) != tc.ok {
				t.Errorf("%s, tolerance %s: %v", p.Name(), tc.tolerance, err)
			}
		}
	}
}
