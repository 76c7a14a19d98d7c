package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/e2etest"
	"github.com/weeklydigest/digest/internal/mailpittest"
	"github.com/weeklydigest/digest/sender/outbox"

	_ "modernc.org/sqlite" // the ledger file, read by database/sql
)

// verifyReport is the --json of "digest verify", as a script reads it.
type verifyReport struct {
	Week              string           `json:"week"`
	Provider          string           `json:"provider"`
	Sent              int              `json:"sent"`
	Sample            int              `json:"sample"`
	Checked           int              `json:"checked"`
	FoundOnce         int              `json:"found_once"`
	NotFound          []string         `json:"not_found"`
	Duplicated        []map[string]any `json:"duplicated"`
	UnrecordedChecked bool             `json:"unrecorded_checked"`
	Unrecorded        []map[string]any `json:"unrecorded"`
	Errors            int              `json:"errors"`
	ProviderCalls     int              `json:"provider_calls"`
	Duration          *float64         `json:"duration"`
	ExitCode          int              `json:"exit_code"`
}

func decodeVerify(t *testing.T, r e2etest.Result) verifyReport {
	t.Helper()
	var rep verifyReport
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("verify --json: %v\n%s", err, r.Stdout)
	}
	return rep
}

// sentWeek seeds and runs week 40 and returns the customers who got a digest.
func sentWeek(t *testing.T, n int) (*e2etest.Env, map[string]bool) {
	t.Helper()
	e := e2etest.NewEnv(t)
	want := e.Seed(n, week40)
	e.MustRun("run", "--week", "2026-W40")
	e.AssertExactlyOnce(want)
	return e, want
}

// someMessage returns one message Mailpit holds and the digest key of its tag.
func someMessage(t *testing.T, mp *mailpittest.Server) (mailpittest.Message, digest.Key) {
	t.Helper()
	msgs, err := mp.Messages(context.Background())
	if err != nil || len(msgs) == 0 {
		t.Fatalf("messages: %v, %v", msgs, err)
	}
	for _, tag := range msgs[0].Tags {
		if hex, ok := strings.CutPrefix(tag, "dk-k1-"); ok {
			return msgs[0], digest.Key("k1:" + hex)
		}
	}
	t.Fatalf("message %s has no digest tag: %v", msgs[0].ID, msgs[0].Tags)
	return mailpittest.Message{}, ""
}

// noAddress fails if out names a customer's address.
func noAddress(t *testing.T, out string, want map[string]bool) {
	t.Helper()
	for email := range want {
		if strings.Contains(out, email) {
			t.Fatalf("verify output names the address %s:\n%s", email, out)
		}
	}
}

// A clean week agrees: every sent receipt found once, nothing unrecorded,
// exit 0, and the last verification pushed to job="digest_verify",
// week=2026-W40. --json has the documented shape; Mailpit is counted from
// its listing, one call for a week under a thousand messages.
func TestVerifyPassesOnACleanWeek(t *testing.T) {
	t.Parallel()
	e, want := sentWeek(t, 80)
	var mu sync.Mutex
	var pushed []string
	pg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		pushed = append(pushed, r.Method+" "+r.URL.Path)
		mu.Unlock()
	}))
	t.Cleanup(pg.Close)

	r := e.RunEnv([]string{"DIGEST_PUSHGATEWAY_URL=" + pg.URL}, "verify", "--week", "2026-W40")
	if r.Code != 0 || !strings.Contains(r.Stdout, "verdict: agrees") {
		t.Fatalf("verify exit %d, want 0\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	noAddress(t, r.Stdout+r.Stderr, want)
	mu.Lock()
	if len(pushed) != 1 || pushed[0] != "PUT /metrics/job/digest_verify/week/2026-W40" {
		t.Errorf("pushes %v, want one PUT to job digest_verify, week 2026-W40", pushed)
	}
	mu.Unlock()

	r = e.Run("verify", "--week", "2026-W40", "--json")
	rep := decodeVerify(t, r)
	n := len(want)
	if r.Code != 0 || rep.Week != "2026-W40" || !strings.HasPrefix(rep.Provider, "mailpit+http://") ||
		rep.Sent != n || rep.Checked != n || rep.FoundOnce != n || rep.Sample != 0 ||
		rep.NotFound == nil || len(rep.NotFound) != 0 || rep.Duplicated == nil || len(rep.Duplicated) != 0 ||
		!rep.UnrecordedChecked || rep.Unrecorded == nil || len(rep.Unrecorded) != 0 ||
		rep.Errors != 0 || rep.ProviderCalls != 1 || rep.Duration == nil || rep.ExitCode != 0 {
		t.Fatalf("exit %d, report %+v; want all %d found once\n%s", r.Code, rep, n, r.Stdout)
	}
}

// A message deleted from Mailpit leaves a sent receipt without a message:
// exit 1, naming its key.
func TestVerifyNamesAMessageDeletedFromMailpit(t *testing.T) {
	t.Parallel()
	e, want := sentWeek(t, 40)
	msg, key := someMessage(t, e.Mailpit)
	body, _ := json.Marshal(map[string][]string{"IDs": {msg.ID}})
	req, err := http.NewRequest(http.MethodDelete, e.Mailpit.APIURL()+"/api/v1/messages", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("delete %s: %v %v", msg.ID, resp, err)
	}
	resp.Body.Close()

	r := e.Run("verify", "--week", "2026-W40")
	if r.Code != 1 || !strings.Contains(r.Stdout, "not found: "+string(key)+"\n") || !strings.Contains(r.Stdout, "DISAGREES") {
		t.Fatalf("verify exit %d, want 1 naming %s as not found\n%s%s", r.Code, key, r.Stdout, r.Stderr)
	}
	noAddress(t, r.Stdout+r.Stderr, want)
	rep := decodeVerify(t, e.Run("verify", "--week", "2026-W40", "--json"))
	if len(rep.NotFound) != 1 || rep.NotFound[0] != string(key) || rep.FoundOnce != len(want)-1 || rep.ExitCode != 1 {
		t.Fatalf("report %+v; want %s alone not found", rep, key)
	}
}

// The same digest handed to Mailpit's SMTP a second time, behind the
// ledger's back (same headers, so the same key and tag): exit 1, naming the
// key with its two messages.
func TestVerifyNamesADigestSentTwice(t *testing.T) {
	t.Parallel()
	e, _ := sentWeek(t, 40)
	msg, key := someMessage(t, e.Mailpit)
	raw, err := e.Mailpit.Raw(context.Background(), msg.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := smtp.SendMail(e.Mailpit.SMTPAddr(), nil, "digest@bank.example", []string{"copy@example.com"}, raw); err != nil {
		t.Fatal(err)
	}

	r := e.Run("verify", "--week", "2026-W40")
	if r.Code != 1 || !strings.Contains(r.Stdout, "duplicated: "+string(key)+" (2 messages)") {
		t.Fatalf("verify exit %d, want 1 naming %s as duplicated\n%s%s", r.Code, key, r.Stdout, r.Stderr)
	}
	rep := decodeVerify(t, e.Run("verify", "--week", "2026-W40", "--json"))
	if len(rep.Duplicated) != 1 || rep.Duplicated[0]["key"] != string(key) || rep.Duplicated[0]["count"] != 2.0 || len(rep.NotFound) != 0 {
		t.Fatalf("report %+v; want %s duplicated twice", rep, key)
	}
}

// A message whose key is a receipt of the week that is not sent (here the
// receipt says failed, as after a reply lost on a permanent-looking error)
// is unrecorded: exit 1, naming the key and the receipt's state.
func TestVerifyReportsAnUnrecordedMessage(t *testing.T) {
	t.Parallel()
	e, _ := sentWeek(t, 40)
	_, key := someMessage(t, e.Mailpit)
	if _, err := e.Pool.Exec(context.Background(), `UPDATE receipts SET state = 'failed', last_error = 'lost reply' WHERE key = $1`, string(key)); err != nil {
		t.Fatal(err)
	}
	r := e.Run("verify", "--week", "2026-W40")
	if r.Code != 1 || !strings.Contains(r.Stdout, "unrecorded: "+string(key)+" (receipt failed)") {
		t.Fatalf("verify exit %d, want 1 naming %s as unrecorded\n%s%s", r.Code, key, r.Stdout, r.Stderr)
	}
	if strings.Contains(r.Stdout, "not found: ") {
		t.Fatalf("a failed receipt is not a sent one to look up:\n%s", r.Stdout)
	}
}

// --sample N checks N of the week's sent receipts, and says so.
func TestVerifySample(t *testing.T) {
	t.Parallel()
	e, want := sentWeek(t, 80)
	r := e.Run("verify", "--week", "2026-W40", "--sample", "10", "--json")
	rep := decodeVerify(t, r)
	if r.Code != 0 || rep.Sample != 10 || rep.Checked != 10 || rep.FoundOnce != 10 || rep.Sent != len(want) {
		t.Fatalf("exit %d, report %+v; want 10 of %d checked", r.Code, rep, len(want))
	}
	r = e.Run("verify", "--week", "2026-W40", "--sample", "10")
	if r.Code != 0 || !strings.Contains(r.Stdout, "checked (a random sample)") {
		t.Fatalf("exit %d\n%s", r.Code, r.Stdout)
	}
}

// A provider that cannot be asked: exit 3, not a verdict on the week; a
// week without sent receipts (the wrong ledger or week) does not pass.
// Mistakes in the command line or a provider that cannot be asked at all
// (an SMTP relay) are usage errors.
func TestVerifyProviderDownAndUsage(t *testing.T) {
	t.Parallel()
	e, _ := sentWeek(t, 20)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	r := e.RunEnv([]string{"DIGEST_LOOKUP_URL=mailpit+" + down.URL}, "verify", "--week", "2026-W40", "--sample", "2", "--json")
	if rep := decodeVerify(t, r); r.Code != 3 || rep.Errors == 0 || rep.Checked != 0 || rep.ExitCode != 3 {
		t.Fatalf("provider down: exit %d, report %+v; want 3\n%s", r.Code, rep, r.Stderr)
	}
	r = e.Run("verify", "--week", "2026-W41")
	if r.Code != 3 || !strings.Contains(r.Stdout, "nothing to verify") {
		t.Fatalf("a week without sent receipts: exit %d, want 3\n%s", r.Code, r.Stdout)
	}
	for _, c := range []struct {
		extra []string
		args  []string
		want  string
	}{
		{[]string{"DIGEST_LOOKUP_URL="}, []string{"--week", "2026-W40"}, "an SMTP relay cannot be asked"},
		{nil, []string{"--week", "2026-W40", "--sample", "-1"}, "--sample -1"},
		{nil, []string{"--week", "2026-40"}, "--week"},
		{nil, []string{"--week", "2026-W40", "--rate", "-1"}, "--rate"},
	} {
		r := e.RunEnv(c.extra, append([]string{"verify"}, c.args...)...)
		if r.Code != 2 || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("verify %v: exit %d, want 2 saying %q\n%s", c.args, r.Code, c.want, r.Stderr)
		}
	}
}

// The embedded default: a SQLite ledger and the file outbox. A clean week
// agrees; an outbox file removed is named as not found; a file whose
// receipt says failed is named as unrecorded.
func TestVerifyOutbox(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := e2etest.Bare(t, dir)
	snap := filepath.Join(e2etest.RepoRoot(), "examples", "snapshot.jsonl")
	e.Vars = []string{"DIGEST_HMAC_KEYS=" + e2etest.TestKeyring}
	e.MustRun("run", "--snapshot", snap, "--week", "2026-W48")

	r := e.Run("verify", "--week", "2026-W48", "--json")
	rep := decodeVerify(t, r)
	if r.Code != 0 || rep.Checked == 0 || rep.FoundOnce != rep.Checked || !rep.UnrecordedChecked || !strings.HasPrefix(rep.Provider, "outbox ") {
		t.Fatalf("clean outbox week: exit %d, report %+v\n%s", r.Code, rep, r.Stderr)
	}
	files, err := filepath.Glob(filepath.Join(dir, "outbox", "*.eml"))
	if err != nil || len(files) != rep.Checked {
		t.Fatalf("%d outbox files, %v; want %d", len(files), err, rep.Checked)
	}
	gone := filepath.Base(files[0])
	if err := os.Remove(files[0]); err != nil {
		t.Fatal(err)
	}
	kid, hex, _ := strings.Cut(strings.TrimSuffix(gone, ".eml"), "_")
	key := digest.Key(kid + ":" + hex)
	if outbox.FileName(key) != gone {
		t.Fatalf("file %s is not named by a key", gone)
	}
	r = e.Run("verify", "--week", "2026-W48")
	if r.Code != 1 || !strings.Contains(r.Stdout, "not found: "+string(key)+"\n") {
		t.Fatalf("outbox file removed: exit %d, want 1 naming %s\n%s%s", r.Code, key, r.Stdout, r.Stderr)
	}

	kid, hex, _ = strings.Cut(strings.TrimSuffix(filepath.Base(files[1]), ".eml"), "_")
	failed := kid + ":" + hex
	db, err := sql.Open("sqlite", filepath.Join(dir, "digest.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if res, err := db.Exec(`UPDATE receipts SET state = 'failed', last_error = 'lost reply' WHERE key = ?`, failed); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("updated %d receipts, want 1", n)
	}
	r = e.Run("verify", "--week", "2026-W48")
	if r.Code != 1 || !strings.Contains(r.Stdout, "unrecorded: "+failed+" (receipt failed)") {
		t.Fatalf("outbox file of a failed receipt: exit %d, want 1 naming %s\n%s%s", r.Code, failed, r.Stdout, r.Stderr)
	}
}
