package smtp_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/sender/smtp"
)

var smtpURLCases = []struct {
	in   string
	want smtp.Server
	err  bool
}{
	{in: "smtp://mail.example.com", want: smtp.Server{Host: "mail.example.com", Port: 587, TLS: smtp.TLSMandatory}},
	{in: "smtp://mail.example.com:2525?tls=opportunistic", want: smtp.Server{Host: "mail.example.com", Port: 2525, TLS: smtp.TLSOpportunistic}},
	{in: "smtp://mail.example.com?tls=implicit", want: smtp.Server{Host: "mail.example.com", Port: 465, TLS: smtp.TLSImplicit}},
	{in: "smtps://mail.example.com", want: smtp.Server{Host: "mail.example.com", Port: 465, TLS: smtp.TLSImplicit}},
	{in: "smtp://127.0.0.1:1025?tls=none", want: smtp.Server{Host: "127.0.0.1", Port: 1025, TLS: smtp.TLSNone}},
	{in: "smtp://[::1]:25?tls=none", want: smtp.Server{Host: "::1", Port: 25, TLS: smtp.TLSNone}},
	{in: "smtp://user:p%40ss%3Aword@mail.example.com?auth=login", want: smtp.Server{Host: "mail.example.com", Port: 587, Username: "user", Password: "p@ss:word", Auth: smtp.AuthLogin}},
	{in: "smtp://apikey:secret@smtp.example.com", want: smtp.Server{Host: "smtp.example.com", Port: 587, Username: "apikey", Password: "secret", Auth: smtp.AuthAuto}},
	{in: "smtp://u:tok@h?auth=xoauth2&tls=implicit", want: smtp.Server{Host: "h", Port: 465, Username: "u", Password: "tok", Auth: smtp.AuthXOAuth2, TLS: smtp.TLSImplicit}},
	{in: "smtp://u:pw@h?auth=cram-md5", want: smtp.Server{Host: "h", Port: 587, Username: "u", Password: "pw", Auth: smtp.AuthCRAMMD5}},
	{in: "smtp://u@h?auth=plain", want: smtp.Server{Host: "h", Port: 587, Username: "u", Auth: smtp.AuthPlain}},
	{in: "", err: true},
	{in: "mail.example.com", err: true},
	{in: "http://mail.example.com", err: true},
	{in: "smtp://", err: true},
	{in: "smtp://h:0", err: true},
	{in: "smtp://h:70000", err: true},
	{in: "smtp://h:abc", err: true},
	{in: "smtp://h?tls=maybe", err: true},
	{in: "smtp://h?auth=ntlm", err: true},
	{in: "smtp://h?auth=plain", err: true},
	{in: "smtp://h?tls=none&tls=mandatory", err: true},
	{in: "smtp://h?port=25", err: true},
	{in: "smtp://h/path", err: true},
	{in: "smtp://:pw@h", err: true},
	{in: "smtp://u:sec%zzret@h", err: true},
	{in: "smtp://u:secret@h:99999", err: true},
	{in: "smtp://u:secret@h?tls=secret", err: true},
}

func TestParseSMTPURL(t *testing.T) {
	t.Parallel()
	for _, c := range smtpURLCases {
		got, err := smtp.ParseSMTPURL(c.in)
		if c.err {
			if !errors.Is(err, smtp.ErrSMTPURL) {
				t.Errorf("ParseSMTPURL(%q) = %+v, %v; want ErrSMTPURL", c.in, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseSMTPURL(%q) = %#v, %v; want %#v", c.in, got, err, c.want)
		}
	}
}

func TestServerNeverPrintsPassword(t *testing.T) {
	t.Parallel()
	c, err := smtp.ParseSMTPURL("smtp://user:hunter2hunter2@mail.example.com?auth=plain")
	if err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "smtp", c)
	for _, s := range []string{c.String(), fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), logged.String()} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("%q shows the password", s)
		}
		if !strings.Contains(s, "user") || !strings.Contains(s, "mail.example.com") {
			t.Errorf("%q lost user or host", s)
		}
	}
}

// FuzzParseSMTPURL checks that no input panics, that an accepted URL
// round-trips through String (password aside), and that no error shows the
// password.
func FuzzParseSMTPURL(f *testing.F) {
	for _, c := range smtpURLCases {
		f.Add(c.in, "s3cretpass")
	}
	f.Fuzz(func(t *testing.T, in, pass string) {
		c, err := smtp.ParseSMTPURL(in)
		if err == nil {
			if c.Host == "" || c.Port < 1 || c.Port > 65535 {
				t.Fatalf("accepted %q as %#v", in, c)
			}
			back, err := smtp.ParseSMTPURL(c.String())
			if err != nil {
				t.Fatalf("String() of %q = %q does not parse: %v", in, c.String(), err)
			}
			back.Password = c.Password
			if c.Password != "" && back.Password != c.Password || back != c {
				t.Fatalf("round trip %q → %q → %#v, want %#v", in, c.String(), back, c)
			}
		}
		// Put pass into the URL as the password and check it never leaks.
		if len(pass) < 8 || strings.ContainsAny(pass, "@/?#[]") {
			return
		}
		withPass := "smtp://user:" + pass + "@" + strings.TrimPrefix(in, "smtp://")
		_, err = smtp.ParseSMTPURL(withPass)
		if err != nil && strings.Contains(err.Error(), pass) && !strings.Contains(in, pass) {
			t.Fatalf("error %q shows the password %q", err, pass)
		}
	})
}
