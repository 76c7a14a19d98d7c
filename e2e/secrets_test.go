package e2e

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/internal/e2etest"
)

// secretPW is the password every URL of TestNoSecretOnScreen carries.
const secretPW = "S3cretPW"

// closedAddr returns a 127.0.0.1 address nothing listens on: a test
// server's, closed.
func closedAddr(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.Listener.Addr().String()
}

// withPassword returns url with user:secretPW as its user information.
func withPassword(t *testing.T, url, user string) string {
	t.Helper()
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		t.Fatalf("not a URL: %s", url)
	}
	if i := strings.IndexByte(rest, '@'); i >= 0 && i < strings.IndexByte(rest+"/", '/') {
		rest = rest[i+1:]
	}
	return scheme + "://" + user + ":" + secretPW + "@" + rest
}

// Issue 35: no password of a URL is ever on screen. With passwords in
// DIGEST_DATABASE_URL, DIGEST_SMTP_URL, DIGEST_PUSHGATEWAY_URL and the
// OTLP endpoint, --help, runs and status that succeed and that fail (a
// Pushgateway, a database, an SMTP server, a collector that cannot be
// reached; a database role that does not exist) print the URLs with the
// user kept and the password xxxxx, on stdout and stderr alike.
func TestNoSecretOnScreen(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	e.Seed(20, week40)
	dbURL := withPassword(t, e.URL, "postgres") // the test server trusts 127.0.0.1: any password connects
	// Mailpit takes no AUTH without TLS: the SMTP password is in the help
	// and the failing runs only.
	smtpURL := []string{"DIGEST_SMTP_URL=smtp://digest:" + secretPW + "@" + e.Mailpit.SMTPAddr() + "?tls=none"}
	pushURL := "http://metrics:" + secretPW + "@" + closedAddr(t)
	otlpURL := "http://otel:" + secretPW + "@" + closedAddr(t)
	e.Set("DIGEST_DATABASE_URL", dbURL)
	e.Set("DIGEST_PUSHGATEWAY_URL", pushURL)
	e.Set("OTEL_EXPORTER_OTLP_ENDPOINT", otlpURL)

	type step struct {
		name  string
		extra []string
		args  []string
		code  int // -1: any
	}
	steps := []step{
		{"digest --help", smtpURL, []string{"--help"}, 0},
		{"run --help", smtpURL, []string{"run", "--help"}, 0},
		{"status --help", smtpURL, []string{"status", "--help"}, 0},
		{"run, the Pushgateway and the collector unreachable", nil, []string{"run", "--week", "2026-W40"}, 0},
		{"status, the Pushgateway unreachable", nil, []string{"status", "--week", "2026-W40"}, 0},
		{"status --json", nil, []string{"status", "--week", "2026-W40", "--json"}, 0},
		{"run, the SMTP server unreachable", []string{"DIGEST_SMTP_URL=smtp://digest:" + secretPW + "@" + closedAddr(t) + "?tls=none"},
			[]string{"run", "--week", "2026-W41", "--deadline", "0"}, -1},
		{"run, the database unreachable", []string{"DIGEST_DATABASE_URL=postgres://postgres:" + secretPW + "@" + closedAddr(t) + "/test?sslmode=disable&connect_timeout=5"},
			[]string{"run", "--week", "2026-W40"}, -1},
		{"status, the database unreachable", []string{"DIGEST_DATABASE_URL=postgres://postgres:" + secretPW + "@" + closedAddr(t) + "/test?sslmode=disable&connect_timeout=5"},
			[]string{"status", "--week", "2026-W40"}, -1},
		{"run, a database role that does not exist", []string{"DIGEST_DATABASE_URL=" + withPassword(t, e.URL, "nosuchrole")},
			[]string{"run", "--week", "2026-W40"}, -1},
		{"status, a database role that does not exist", []string{"DIGEST_DATABASE_URL=" + withPassword(t, e.URL, "nosuchrole")},
			[]string{"status", "--week", "2026-W40"}, -1},
		{"run --mode observe, the SMTP server unreachable", []string{"DIGEST_SMTP_URL=smtp://digest:" + secretPW + "@" + closedAddr(t) + "?tls=none"},
			[]string{"run", "--week", "2026-W40", "--mode", "observe"}, -1},
		{"run, a Pushgateway URL that does not parse", []string{"DIGEST_PUSHGATEWAY_URL=http://metrics:" + secretPW + "@127.0.0.1:port"},
			[]string{"run", "--week", "2026-W40"}, -1},
		{"run, a database URL that does not parse", []string{"DIGEST_DATABASE_URL=postgres://postgres:" + secretPW + "@127.0.0.1:port/test"},
			[]string{"run", "--week", "2026-W40"}, -1},
		{"status, a database URL that does not parse", []string{"DIGEST_DATABASE_URL=postgres://postgres:" + secretPW + "@127.0.0.1:port/test"},
			[]string{"status", "--week", "2026-W40"}, -1},
		{"run, an SMTP URL that does not parse", []string{"DIGEST_SMTP_URL=smtp://digest:" + secretPW + "@127.0.0.1:port"},
			[]string{"run", "--week", "2026-W40"}, -1},
		{"run, an OTLP endpoint that does not parse", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://otel:" + secretPW + "@127.0.0.1:port"},
			[]string{"run", "--week", "2026-W40"}, -1},
	}
	failures := 0
	for _, s := range steps {
		r := e.RunEnv(s.extra, s.args...)
		if s.code >= 0 && r.Code != s.code {
			t.Errorf("%s: exit %d, want %d\n%s%s", s.name, r.Code, s.code, r.Stdout, r.Stderr)
		}
		if r.Code != 0 {
			failures++
		}
		for stream, out := range map[string]string{"stdout": r.Stdout, "stderr": r.Stderr} {
			if strings.Contains(out, secretPW) {
				t.Errorf("%s: the password is on %s:\n%s", s.name, stream, out)
			}
		}
		if s.name == "run --help" && !strings.Contains(r.Stdout+r.Stderr, "digest:xxxxx@") {
			t.Errorf("run --help does not show DIGEST_SMTP_URL with its user and the password masked:\n%s", r.Stdout)
		}
	}
	if failures < 5 {
		t.Errorf("only %d steps failed: the failures this test provokes did not happen", failures)
	}
}
