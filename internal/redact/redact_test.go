package redact_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weeklydigest/digest/internal/redact"
)

// marker is the password of every case: no output may contain it.
const marker = "S3cretPW"

var urlCases = []struct{ raw, want string }{
	{"", ""},
	{"postgres://app:S3cretPW@127.0.0.1:1/app?sslmode=disable", "postgres://app:xxxxx@127.0.0.1:1/app?sslmode=disable"},
	{"postgresql://app@db/app", "postgresql://app@db/app"},
	{"postgres://u:S3cret:PW@h1:5432,h2:5432/db", "postgres://u:xxxxx@h1:5432,h2:5432/db"},
	{"postgres://u:S3c%40retPW@db/app", "postgres://u:xxxxx@db/app"},
	{"postgres://u:p@ss@S3cretPW@db/app", "postgres://u:xxxxx@db/app"},
	{"postgres://db/app?password=S3cretPW&sslpassword=S3cretPW&sslmode=require", "postgres://db/app?password=xxxxx&sslpassword=xxxxx&sslmode=require"},
	{"postgres://db/app?pass%77ord=S3cretPW", "postgres://db/app?pass%77ord=xxxxx"},
	{"postgres://db/app?%zz=S3cretPW&sslmode=require", "postgres://db/app?xxxxx&sslmode=require"},
	{"POSTGRES://App:S3cretPW@DB/app", "POSTGRES://App:xxxxx@DB/app"},
	{"smtp://mailer:S3cretPW@127.0.0.1:1", "smtp://mailer:xxxxx@127.0.0.1:1"},
	{"smtp://mailer@smtp.example.com:587?tls=mandatory&auth=plain", "smtp://mailer@smtp.example.com:587?tls=mandatory&auth=plain"},
	{"smtp://mailer:@smtp.example.com", "smtp://mailer:xxxxx@smtp.example.com"},
	{"mailpit+http://admin:S3cretPW@mailpit:8025", "mailpit+http://admin:xxxxx@mailpit:8025"},
	{"https://api.example.com/v1?token=S3cretPW&api_key=S3cretPW&APIKey=S3cretPW&Access-Token=S3cretPW&region=eu", "https://api.example.com/v1?token=xxxxx&api_key=xxxxx&APIKey=xxxxx&Access-Token=xxxxx&region=eu"},
	{"https://s3.example.com/b?X-Amz-Signature=S3cretPW&X-Amz-Credential=S3cretPW&sig=S3cretPW&secret=S3cretPW&key=S3cretPW", "https://s3.example.com/b?X-Amz-Signature=xxxxx&X-Amz-Credential=xxxxx&sig=xxxxx&secret=xxxxx&key=xxxxx"},
	{"http://otel:4318/v1/traces#S3cretPW", "http://otel:4318/v1/traces"},
	{"http://pushgateway:9091", "http://pushgateway:9091"},
	{"https://unsubscribe.example.com/u/{token}", "https://unsubscribe.example.com/u/{token}"},
	{"mailto:unsubscribe+{token}@example.com", "mailto:unsubscribe+{token}@example.com"},
	{"mailto:a:S3cretPW@example.com?subject=x&token=S3cretPW", "mailto:a:xxxxx@example.com?subject=x&token=xxxxx"},
	{"events:ses", "events:ses"},
	{"host=db user=app password=S3cretPW dbname=app", "host=db user=app password=xxxxx dbname=app"},
	{"  host = db   password = 'S3c ret\\'PW'  sslpassword=S3cretPW sslmode=require ", "host=db password=xxxxx sslpassword=xxxxx sslmode=require"},
	{"password=S3cret\\ PW host=db", "password=xxxxx host=db"},
	{"password='S3cretPW host=db", redact.Unparsable},
	{"host=db S3cretPW", redact.Unparsable},
	{"S3cretPW", redact.Unparsable},
	{"db.example.com:5432", "db.example.com:5432"}, // a scheme to net/url: nothing secret in it
	{"postgres://app:S3cretPW@db:notaport/app", redact.Unparsable},
	{"postgres://app:S3cretPW@[::1/app", redact.Unparsable},
	{"http://a b:S3cretPW@host/", redact.Unparsable},
}

func TestURL(t *testing.T) {
	t.Parallel()
	for _, tc := range urlCases {
		got := redact.URL(tc.raw)
		if got != tc.want {
			t.Errorf("URL(%q) = %q; want %q", tc.raw, got, tc.want)
		}
		if strings.Contains(got, marker) {
			t.Errorf("URL(%q) = %q shows the password", tc.raw, got)
		}
	}
}

func TestSecretName(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"password", "PASSWORD", "sslpassword", "passwd", "pwd", "token", "access_token", "auth_token", "secret", "client_secret", "key", "api_key", "apikey", "API-Key", "sslkey", "X-Amz-Signature", "X-Amz-Security-Token", "sig", "Authorization"} {
		if !redact.SecretName(name) {
			t.Errorf("SecretName(%q) = false", name)
		}
	}
	for _, name := range []string{"sslmode", "tls", "auth", "user", "host", "dbname", "region", "application_name", "keepalives", "subject"} {
		if redact.SecretName(name) {
			t.Errorf("SecretName(%q) = true", name)
		}
	}
}

var errSentinel = errors.New("unexpected status code 500")

func TestError(t *testing.T) {
	t.Parallel()
	raw := "http://pusher:S3c%2FretPW@pushgw:9091?token=S3cretPW"
	err := fmt.Errorf("%w while pushing to %s/metrics/job/digest (password S3c/retPW, token S3cretPW)", errSentinel, raw)
	got := redact.Error(err, "", raw)
	msg := got.Error()
	if strings.Contains(msg, "S3c") {
		t.Errorf("Error: %q shows a secret", msg)
	}
	if want := "while pushing to http://pusher:xxxxx@pushgw:9091?token=xxxxx/metrics/job/digest (password xxxxx, token xxxxx)"; !strings.Contains(msg, want) {
		t.Errorf("Error: %q; want it to contain %q", msg, want)
	}
	if !errors.Is(got, errSentinel) {
		t.Errorf("errors.Is(Error(err), sentinel) = false")
	}
	if redact.Error(nil, raw) != nil {
		t.Error("Error(nil) != nil")
	}
	plain := errors.New("connection refused")
	if redact.Error(plain, raw) != plain {
		t.Error("Error changed an error that holds no secret")
	}
	if msg := redact.Error(fmt.Errorf("bad endpoint %s", "S3cretPW x"), "S3cretPW x").Error(); msg != "bad endpoint (unparsable URL)" {
		t.Errorf("Error of an unparsable value: %q", msg)
	}
}

// FuzzURL checks that a password or secret parameter, wherever the parser
// of its kind (net/url, pgconn) puts it, never reaches URL's output, and
// that what net/url cannot parse is never echoed.
func FuzzURL(f *testing.F) {
	for _, tc := range urlCases {
		f.Add(tc.raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got := redact.URL(raw)
		if strings.Count(strings.ToLower(raw), strings.ToLower(marker)) != 1 {
			return
		}
		if secretPlace(raw) && strings.Contains(strings.ToLower(got), strings.ToLower(marker)) {
			t.Fatalf("URL(%q) = %q shows the secret", raw, got)
		}
		if _, err := url.Parse(raw); err != nil && !strings.Contains(raw, "=") && got != redact.Unparsable {
			t.Fatalf("URL(%q) = %q; want %q", raw, got, redact.Unparsable)
		}
	})
}

// secretPlace reports whether marker is in a secret of raw as net/url or
// pgconn read it: the password, a secret parameter's value, the fragment
// of a URL; the password of a keyword/value connection string.
func secretPlace(raw string) bool {
	if cfg, err := pgconn.ParseConfig(raw); err == nil && !strings.Contains(raw, "://") && strings.Contains(cfg.Password, marker) {
		return true
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" { // no scheme: not a URL (URL shows none)
		return false
	}
	if p, _ := u.User.Password(); strings.Contains(p, marker) {
		return true
	}
	if strings.Contains(u.Fragment, marker) {
		return true
	}
	for k, vs := range u.Query() {
		for _, v := range vs {
			if redact.SecretName(k) && strings.Contains(v, marker) {
				return true
			}
		}
	}
	return false
}
