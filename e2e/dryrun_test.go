package e2e

import (
	"bufio"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/internal/e2etest"
)

// A dry run refuses every setting the real run would refuse (exit 2),
// with the outbox too, and creates no outbox doing so.
func TestDryRunValidatesEverySetting(t *testing.T) {
	t.Parallel()
	e, dir := embeddedDryRun(t)
	args := []string{"run", "--mode", "observe", "--snapshot", "examples/snapshot.jsonl", "--week", "2026-W48"}
	for _, c := range []struct {
		name  string
		env   []string
		flags []string
		msg   string
	}{
		{"bogus SMTP URL and missing password file", []string{"DIGEST_SMTP_URL=bogus://x", "DIGEST_SMTP_PASSWORD_FILE=/nonexistent"}, nil, "DIGEST_"},
		{"rate not a number, outbox", nil, []string{"--rate", "abc"}, `DIGEST_RATE="abc"`},
		{"burst not a number, outbox", []string{"DIGEST_BURST=many"}, nil, `DIGEST_BURST="many"`},
		{"missing password file, outbox", []string{"DIGEST_SMTP_PASSWORD_FILE=/nonexistent"}, nil, "DIGEST_SMTP_PASSWORD_FILE"},
		{"lookup URL malformed", []string{"DIGEST_LOOKUP_URL=ftp://x"}, nil, "DIGEST_LOOKUP_URL"},
	} {
		r := e.RunEnv(c.env, append(append([]string(nil), args...), c.flags...)...)
		if r.Code != 2 || !r.Says(c.msg) {
			t.Errorf("%s: exit %d, want 2 with %q\n%s", c.name, r.Code, c.msg, r.Stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "outbox")); !os.IsNotExist(err) {
		t.Fatalf("a refused dry run left an outbox (%v)", err)
	}
}

// A dry run connects to the SMTP server (EHLO, AUTH, QUIT) and asks the
// look-up, reports both, and sends nothing; a server the real run could
// not use (STARTTLS required, not offered) or a look-up it could not reach
// makes the dry run exit 2.
func TestDryRunChecksServers(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	e.Seed(10, week40)
	e.Set("DIGEST_SMTP_URL", "smtp://digest:s3cretpw@"+e.Mailpit.SMTPAddr()+"?tls=none&auth=plain")

	secrets := []string{"DIGEST_POSTMARK_TOKEN=pm-t0ken-secret"}
	if u, err := url.Parse(e.URL); err == nil && u.Scheme != "" && u.User != nil {
		// Trust authentication ignores the password; the log must not show it.
		u.User = url.UserPassword(u.User.Username(), "db-pa55word")
		secrets = append(secrets, "DIGEST_DATABASE_URL="+u.String())
	}
	ok := e.RunEnv(secrets, "run", "--mode", "observe", "--week", "2026-W40")
	if ok.Code != 0 {
		t.Fatalf("observe run: exit %d\n%s", ok.Code, ok.Stderr)
	}
	for _, want := range []string{"smtp check passed", "lookup check passed"} {
		if !strings.Contains(ok.Stderr, want) {
			t.Errorf("the log lacks %q:\n%s", want, ok.Stderr)
		}
	}
	if line := finalLine(t, ok); line["smtp_check"] != "ok" || line["lookup_check"] != "ok" {
		t.Errorf("summary line: smtp_check %v, lookup_check %v; want ok, ok", line["smtp_check"], line["lookup_check"])
	}
	checkRunLog(t, ok, "s3cretpw", "pm-t0ken-secret", "db-pa55word", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8")

	for _, c := range []struct{ name, key, value, want string }{
		{"STARTTLS required, not offered", "DIGEST_SMTP_URL", "smtp://" + e.Mailpit.SMTPAddr() + "?tls=mandatory", "smtp check failed"},
		{"look-up unreachable", "DIGEST_LOOKUP_URL", "mailpit+http://127.0.0.1:1", "lookup check failed"},
		{"no mailer for a PostgreSQL ledger", "DIGEST_SMTP_URL", "", "no mailer"},
	} {
		r := e.RunEnv([]string{c.key + "=" + c.value}, "run", "--mode", "observe", "--week", "2026-W40")
		if r.Code != 2 || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("%s: exit %d, want 2 and %q\n%s", c.name, r.Code, c.want, r.Stderr)
		}
	}
	if n := e.MailpitCount(); n != 0 {
		t.Fatalf("dry runs delivered %d messages", n)
	}
}

// finalLine returns the run's last log line with a summary.
func finalLine(t *testing.T, r e2etest.Result) map[string]any {
	t.Helper()
	var last map[string]any
	for _, line := range logLines(t, r) {
		if _, ok := line["summary"]; ok {
			last = line
		}
	}
	if last == nil {
		t.Fatalf("no summary line:\n%s", r.Stderr)
	}
	return last
}

func logLines(t *testing.T, r e2etest.Result) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(r.Stderr))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil {
			out = append(out, line)
		}
	}
	return out
}

// checkRunLog checks what every run's log must be: a run_id on every line,
// the ledger and mailer named at the start, durations as Go duration
// strings (not integer nanoseconds), and none of the secrets.
func checkRunLog(t *testing.T, r e2etest.Result, secrets ...string) {
	t.Helper()
	lines := logLines(t, r)
	if len(lines) == 0 {
		t.Fatalf("no JSON log lines:\n%s", r.Stderr)
	}
	runID := lines[0]["run_id"]
	started := false
	for _, line := range lines {
		if line["run_id"] == nil || line["run_id"] != runID {
			t.Errorf("line %v: run_id %v, want %v on every line", line["msg"], line["run_id"], runID)
		}
		if line["msg"] == "run configured" {
			started = true
			if l, _ := line["ledger"].(string); !strings.HasPrefix(l, "postgres ") {
				t.Errorf("run configured: ledger %q", l)
			}
			if m, _ := line["mailer"].(string); !strings.HasPrefix(m, "smtp ") || !strings.Contains(m, "look-up mailpit+http://") {
				t.Errorf("run configured: mailer %q", m)
			}
		}
	}
	if !started {
		t.Errorf("no \"run configured\" line naming the ledger and mailer:\n%s", r.Stderr)
	}
	sum := finalLine(t, r)["summary"].(map[string]any)
	for _, k := range []string{"duration", "claim_p50", "claim_p99"} {
		if s, ok := sum[k].(string); !ok || !strings.HasSuffix(s, "s") {
			t.Errorf("summary %s = %#v, want a duration string such as \"1.5s\"", k, sum[k])
		}
	}
	for _, s := range secrets {
		if strings.Contains(r.Stderr, s) || strings.Contains(r.Stdout, s) {
			t.Errorf("the output contains the secret %q", s)
		}
	}
}

// A dry run names a sample of whom it would reach: keys by default,
// addresses only with --observe-addresses (which a sending run refuses).
func TestDryRunLogsASampleOfWouldBeRecipients(t *testing.T) {
	t.Parallel()
	e, _ := embeddedDryRun(t)
	args := []string{"run", "--mode", "observe", "--snapshot", "examples/snapshot.jsonl", "--week", "2026-W48"}
	wouldSend := func(r e2etest.Result) (lines []map[string]any) {
		t.Helper()
		sc := bufio.NewScanner(strings.NewReader(r.Stdout + r.Stderr))
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "would send" {
				lines = append(lines, rec)
			}
		}
		return lines
	}

	r := e.Run(append(args, "--observe-sample", "5")...)
	lines := wouldSend(r)
	if r.Code != 0 || len(lines) != 5 {
		t.Fatalf("exit %d, %d would-send lines, want 0 and 5\n%s%s", r.Code, len(lines), r.Stdout, r.Stderr)
	}
	for _, l := range lines {
		if _, ok := l["to"]; ok || !strings.Contains(l["key"].(string), ":") {
			t.Errorf("sampled line %v: want a key and no address", l)
		}
	}
	if strings.Contains(r.Stdout+r.Stderr, "@example") {
		t.Fatalf("an address reached the log of a dry run without --observe-addresses")
	}

	r = e.Run(append(args, "--observe-sample", "3", "--observe-addresses")...)
	lines = wouldSend(r)
	if r.Code != 0 || len(lines) != 3 {
		t.Fatalf("exit %d, %d would-send lines, want 0 and 3", r.Code, len(lines))
	}
	for _, l := range lines {
		if to, _ := l["to"].(string); !strings.Contains(to, "@") {
			t.Errorf("sampled line %v: want the address", l)
		}
	}

	if r := e.Run(append(args, "--observe-sample", "0")...); r.Code != 0 || len(wouldSend(r)) != 0 {
		t.Fatalf("--observe-sample 0: exit %d, %d lines", r.Code, len(wouldSend(r)))
	}
	if r := e.Run("run", "--snapshot", "examples/snapshot.jsonl", "--week", "2026-W48", "--observe-addresses"); r.Code != 2 {
		t.Fatalf("--observe-addresses on a sending run: exit %d, want 2\n%s", r.Code, r.Stderr)
	}
	if r := e.Run(append(args, "--observe-sample", "-1")...); r.Code != 2 {
		t.Fatalf("--observe-sample -1: exit %d, want 2", r.Code)
	}
}

// embeddedDryRun is the embedded default (SQLite ledger, file outbox) in a
// fresh directory holding a copy of the examples, with a keyring set.
func embeddedDryRun(t *testing.T) (*e2etest.Env, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "examples"), os.DirFS(filepath.Join(e2etest.RepoRoot(), "examples"))); err != nil {
		t.Fatal(err)
	}
	e := e2etest.Bare(t, dir)
	e.Vars = []string{"DIGEST_HMAC_KEYS=" + e2etest.TestKeyring}
	return e, dir
}
