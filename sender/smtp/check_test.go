package smtp_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/mailpittest"
	"github.com/weeklydigest/digest/sender/smtp"
)

func checkConfig(t *testing.T, url string) smtp.Config {
	t.Helper()
	smtpCfg, err := smtp.ParseSMTPURL(url)
	if err != nil {
		t.Fatal(err)
	}
	return smtp.Config{SMTP: smtpCfg, From: digest.Address{Email: "digest@example.com"}, Timeout: 5 * time.Second, HELO: "localhost"}
}

// TestCheckWithoutSTARTTLS: against a server that offers no STARTTLS, the
// check passes only when the URL allows plain text, fails at connect
// otherwise, and never delivers a message.
func TestCheckWithoutSTARTTLS(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, fault{})
	if err := smtp.CheckConnection(ctxT(t), checkConfig(t, "smtp://"+srv.addr+"?tls=none")); err != nil {
		t.Fatalf("Check tls=none: %v", err)
	}
	err := smtp.CheckConnection(ctxT(t), checkConfig(t, "smtp://"+srv.addr+"?tls=mandatory"))
	if !errors.Is(err, smtp.ErrDial) {
		t.Fatalf("Check tls=mandatory against a server without STARTTLS = %v, want ErrDial", err)
	}
	if got := len(srv.messages()); got != 0 {
		t.Fatalf("the server received %d messages, want none", got)
	}
}

// TestCheckMailpit: EHLO and AUTH against Mailpit pass and deliver nothing;
// the error of a refused connection names no password.
func TestCheckMailpit(t *testing.T) {
	t.Parallel()
	mp := mailpittest.Start(t)
	ctx := ctxT(t)
	if err := smtp.CheckConnection(ctx, checkConfig(t, "smtp://user:s3cret@"+mp.SMTPAddr()+"?tls=none&auth=plain")); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if n, err := mp.Count(ctx); err != nil || n != 0 {
		t.Fatalf("Mailpit holds %d messages (%v), want none", n, err)
	}

	err := smtp.CheckConnection(ctx, checkConfig(t, "smtp://user:s3cret@127.0.0.1:1?tls=none&auth=plain"))
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Check against a closed port = %v, want an error without the password", err)
	}
}
