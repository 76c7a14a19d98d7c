package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/e2etest"
	"github.com/weeklydigest/digest/internal/mailpittest"
	"github.com/weeklydigest/digest/unsubscribe"
)

// unsubscribeTemplate is the URL the digests carry; "digest serve"
// answers its path on a loopback port.
const unsubscribeTemplate = "https://bank.example/u/{token}"

// serving is a "digest serve" process of an Env.
type serving struct {
	cmd  *exec.Cmd
	base string // http://127.0.0.1:PORT
	logs chan string
	done chan error
}

// startServe starts "digest serve" on a free loopback port and waits until
// it is ready (the ledger answers).
func startServe(t *testing.T, e *e2etest.Env, extra ...string) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cmd := e.Command(ctx, append([]string{"DIGEST_LISTEN_ADDR=127.0.0.1:0", "DIGEST_LOG_LEVEL=info"}, extra...), "serve")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &serving{cmd: cmd, logs: make(chan string, 1000), done: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			var entry struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "serving" {
				addr <- entry.Addr
			}
			select {
			case s.logs <- line:
			default:
			}
		}
		s.done <- cmd.Wait()
	}()
	select {
	case a := <-addr:
		s.base = "http://" + a
	case err := <-s.done:
		t.Fatalf("digest serve exited before serving: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("digest serve did not start")
	}
	e2etest.WaitFor(t, 30*time.Second, "digest serve ready", func() bool {
		res, err := http.Get(s.base + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	return s
}

// local turns an unsubscribe URL of a message into the same path on the
// service.
func (s *serving) local(t *testing.T, uri string) string {
	t.Helper()
	path, ok := strings.CutPrefix(uri, "https://bank.example")
	if !ok {
		t.Fatalf("unsubscribe URL %q is not the template's", uri)
	}
	return s.base + path
}

// stop sends SIGTERM and returns the log lines and the exit error.
func (s *serving) stop(t *testing.T) ([]string, error) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-s.done:
	case <-time.After(time.Minute):
		t.Fatal("digest serve did not stop on SIGTERM")
	}
	var lines []string
	for {
		select {
		case l := <-s.logs:
			lines = append(lines, l)
		default:
			return lines, err
		}
	}
}

func oneClick(t *testing.T, url string) int {
	t.Helper()
	res, err := http.Post(url, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// The loop closed, end to end: a week goes out through Mailpit with
// one-click URLs pointing at "digest serve"; some recipients POST the
// URL of their message (one twice, one GET only, as a link scanner); the
// next week's run sends them nothing and counts them as suppressed; the
// service stops cleanly on SIGTERM, and its logs hold no address or token.
func TestOneClickThroughServeSuppressesTheNextWeek(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	e.Set("DIGEST_UNSUBSCRIBE_URL", unsubscribeTemplate)
	e.Set("DIGEST_UNSUBSCRIBE_KEYS", unsubscribeKeys)
	week41 := digest.ISOWeek{Year: 2026, Week: 41}
	want40 := e.Seed(40, week40)
	want41 := e.Seed(40, week41)
	srv := startServe(t, e)

	first := e.MustRun("run", "--week", "2026-W40")
	if first.Count(t, "sent") != len(want40) {
		t.Fatalf("week 40: %v", first.Summary(t))
	}
	got := received(t, e.Mailpit)
	var gone []string // in both weeks, and unsubscribed
	var scanned string
	for addr, p := range got {
		if !want41[addr] {
			continue
		}
		uri, err := unsubscribe.CheckOneClick(p.Header)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		switch {
		case len(gone) < 3:
			gone = append(gone, addr)
			if code := oneClick(t, srv.local(t, uri)); code != 200 {
				t.Fatalf("one-click POST for %s: %d", addr, code)
			}
			if len(gone) == 1 {
				if code := oneClick(t, srv.local(t, uri)); code != 200 {
					t.Fatalf("second one-click POST: %d, want 200", code)
				}
			}
		case scanned == "":
			scanned = addr
			res, err := http.Get(srv.local(t, uri))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("GET of the unsubscribe page: %d", res.StatusCode)
			}
		}
	}
	if len(gone) != 3 || scanned == "" {
		t.Fatalf("found %d recipients of both weeks; want at least 4", len(gone))
	}
	var n int
	if err := e.Pool.QueryRow(context.Background(), `SELECT count(*) FROM suppressions WHERE reason = 'unsubscribe' AND source = 'one-click'`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d one-click suppressions, %v; want 3", n, err)
	}

	e.Mailpit = mailpittest.Start(t) // the next week's inbox
	e.Set("DIGEST_SMTP_URL", "smtp://"+e.Mailpit.SMTPAddr()+"?tls=none")
	e.Set("DIGEST_LOOKUP_URL", "mailpit+"+e.Mailpit.APIURL())
	second := e.MustRun("run", "--week", "2026-W41")
	kept := map[string]bool{}
	for a := range want41 {
		kept[a] = true
	}
	for _, a := range gone {
		delete(kept, a)
	}
	e.AssertExactlyOnce(kept)
	if !kept[scanned] {
		t.Fatal("the scanned recipient lost their digest")
	}
	if second.Count(t, "suppressed") != 3 || second.Count(t, "sent") != len(kept) {
		t.Fatalf("week 41: %v; want 3 suppressed and %d sent", second.Summary(t), len(kept))
	}
	// Issue 35 defect 1: the one-click suppressions settle the week, in
	// the fast count and reading every customer.
	for _, extra := range [][]string{nil, {"--customers"}} {
		st := e.Run(append([]string{"status", "--week", "2026-W41", "--json"}, extra...)...)
		var got struct {
			Verdict   string           `json:"verdict"`
			Customers map[string]int64 `json:"customers"`
		}
		if err := json.Unmarshal([]byte(st.Stdout), &got); err != nil || st.Code != 0 || got.Verdict != "complete" ||
			got.Customers["suppressed"] != 3 || got.Customers["pending"] != 0 {
			t.Fatalf("status %v after one-click unsubscribes: exit %d, %v\n%s%s", extra, st.Code, err, st.Stdout, st.Stderr)
		}
	}

	lines, err := srv.stop(t)
	if err != nil {
		t.Fatalf("digest serve on SIGTERM: %v; want exit 0", err)
	}
	logs := strings.Join(lines, "\n")
	if !strings.Contains(logs, `"msg":"unsubscribed"`) || !strings.Contains(logs, "customer_key") {
		t.Fatalf("no unsubscribe log line:\n%s", logs)
	}
	if strings.Contains(logs, "@") || strings.Contains(logs, "u1~") {
		t.Fatalf("the logs hold an address or a token:\n%s", logs)
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("not a JSON log line: %s", l)
		}
	}
}

// "digest serve" refuses what it cannot serve: no URL, a template whose
// token is not the last path segment, no token keyring, a webhook key
// file it cannot read, a soft-bounce streak of no weeks.
func TestServeRefusesABadConfiguration(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"no URL", []string{"DIGEST_UNSUBSCRIBE_KEYS=" + unsubscribeKeys}},
		{"query template", []string{"DIGEST_UNSUBSCRIBE_URL=https://bank.example/u?t={token}", "DIGEST_UNSUBSCRIBE_KEYS=" + unsubscribeKeys}},
		{"mailto template", []string{"DIGEST_UNSUBSCRIBE_URL=mailto:u@bank.example?subject={token}", "DIGEST_UNSUBSCRIBE_KEYS=" + unsubscribeKeys}},
		{"no keyring", []string{"DIGEST_UNSUBSCRIBE_URL=" + unsubscribeTemplate}},
		{"shared keyring", []string{"DIGEST_UNSUBSCRIBE_URL=" + unsubscribeTemplate, "DIGEST_UNSUBSCRIBE_KEYS=" + e2etest.TestKeyring}},
		{"bad rate", []string{"DIGEST_UNSUBSCRIBE_URL=" + unsubscribeTemplate, "DIGEST_UNSUBSCRIBE_KEYS=" + unsubscribeKeys, "DIGEST_SERVE_RATE=fast"}},
		{"missing webhook key file", []string{"DIGEST_UNSUBSCRIBE_URL=" + unsubscribeTemplate, "DIGEST_UNSUBSCRIBE_KEYS=" + unsubscribeKeys, "DIGEST_SENDGRID_WEBHOOK_KEY_FILE=/nonexistent/sendgrid"}},
		{"bad soft-bounce weeks", []string{"DIGEST_UNSUBSCRIBE_URL=" + unsubscribeTemplate, "DIGEST_UNSUBSCRIBE_KEYS=" + unsubscribeKeys, "DIGEST_SOFT_BOUNCE_WEEKS=0"}},
	} {
		if r := e.RunEnv(append(tc.extra, "DIGEST_LISTEN_ADDR=127.0.0.1:0"), "serve"); r.Code != 2 {
			t.Errorf("%s: exit %d, want 2\n%s", tc.name, r.Code, r.Stderr)
		}
	}
}
