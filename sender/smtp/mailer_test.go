package smtp_test

import (
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender/smtp"
)

func TestNewSMTPMailerValidatesConfig(t *testing.T) {
	t.Parallel()
	good, err := smtp.ParseSMTPURL("smtp://127.0.0.1:25?tls=none")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cfg  smtp.Config
	}{
		{"no host", smtp.Config{From: digest.Address{Email: "d@example.com"}}},
		{"bad from", smtp.Config{SMTP: good, From: digest.Address{Email: "not an address"}}},
		{"CRLF in List-Unsubscribe", smtp.Config{SMTP: good, From: digest.Address{Email: "d@example.com"}, ListUnsubscribe: "<mailto:u@example.com>\r\nBcc: x@evil.test"}},
		{"negative concurrency", smtp.Config{SMTP: good, From: digest.Address{Email: "d@example.com"}, Concurrency: -1}},
	}
	for _, c := range cases {
		if m, err := smtp.NewMailer(c.cfg); err == nil {
			_ = m.Close()
			t.Errorf("%s: NewMailer accepted %+v", c.name, c.cfg)
		}
	}
}
