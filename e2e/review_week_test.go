package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/e2etest"
	"github.com/weeklydigest/digest/sender/smtp"
)

// Review at scale: a crash left three sends that may have reached the
// provider; the run holds them. "review show" still says when each send
// started (the takeover kept it); "review list --json" lists them; one of
// them did reach the provider, and "mark-sent --week --from-provider"
// finds and marks exactly that one; "release --week --state held"
// without a look-up refuses the other two (they may have been sent), and
// with --accept-duplicates releases them, and the next run sends them.
func TestReviewWholeWeek(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	lookupURL := "mailpit+" + e.Mailpit.APIURL()
	e.Unset("DIGEST_LOOKUP_URL")
	want := e.Seed(20, week40)
	keys, emails := crashedSends(t, e, 20, 3)

	held := e.Run("run", "--week", "2026-W40", "--ambiguous", "hold")
	if held.Code != 4 || held.Count(t, "held") != 3 {
		t.Fatalf("run after the crash: exit %d, held %d; want 4 and 3\n%s", held.Code, held.Count(t, "held"), held.Stderr)
	}
	show := e.MustRun("review", "show", string(keys[0]))
	if !lineWithTime(show.Stdout, "send started") || !lineWithTime(show.Stdout, "send starts") {
		t.Fatalf("review show does not say when the send started:\n%s", show.Stdout)
	}

	var listed struct {
		Receipts []struct {
			Key           string    `json:"key"`
			State         string    `json:"state"`
			SendStartedAt time.Time `json:"send_started_at"`
		} `json:"receipts"`
		NotListed map[string]int `json:"not_listed"`
	}
	list := e.MustRun("review", "list", "--week", "2026-W40", "--json", "--limit", "2")
	if err := json.Unmarshal([]byte(list.Stdout), &listed); err != nil {
		t.Fatalf("review list --json: %v\n%s", err, list.Stdout)
	}
	if len(listed.Receipts) != 2 || listed.NotListed["held"] != 1 || listed.Receipts[0].State != "held" || listed.Receipts[0].SendStartedAt.IsZero() {
		t.Fatalf("review list --json --limit 2: %+v", listed)
	}

	// The first crashed send did reach the provider.
	deliverAsCrashed(t, e, keys[0], emails[0])

	if r := e.Run("review", "mark-sent", "--week", "2026-W40", "--from-provider", "--reason", "outage OPS-150"); r.Code != 2 || !strings.Contains(r.Stderr, "needs DIGEST_LOOKUP_URL") {
		t.Fatalf("mark-sent --from-provider without a look-up: exit %d, want 2 naming DIGEST_LOOKUP_URL\n%s", r.Code, r.Stderr)
	}
	if r := e.Run("review", "release", "--week", "2026-W40", "--reason", "x"); r.Code != 2 || !strings.Contains(r.Stderr, "release --week needs --state held or --state quarantined") {
		t.Fatalf("release --week without --state: exit %d, want 2\n%s", r.Code, r.Stderr)
	}
	marked := e.RunEnv([]string{"DIGEST_LOOKUP_URL=" + lookupURL}, "review", "mark-sent", "--week", "2026-W40", "--from-provider", "--reason", "outage OPS-150", "--by", "alice")
	if marked.Code != 0 || !strings.Contains(marked.Stdout, "marked 1 held receipts") || !strings.Contains(marked.Stdout, "2 not found") {
		t.Fatalf("mark-sent --from-provider: exit %d\n%s%s", marked.Code, marked.Stdout, marked.Stderr)
	}
	refused := e.Run("review", "release", "--week", "2026-W40", "--state", "held", "--reason", "not at the provider (OPS-150)", "--by", "alice")
	if refused.Code != 1 || !strings.Contains(refused.Stderr, "refused to release 2 maybe-sent receipts") || !strings.Contains(refused.Stderr, "--accept-duplicates") {
		t.Fatalf("release --week of maybe-sent receipts without a look-up: exit %d, want 1 naming the count\n%s%s", refused.Code, refused.Stdout, refused.Stderr)
	}
	if r := e.Receipts(); r["held"] != 2 {
		t.Fatalf("receipts %v after a refused release, want 2 still held", r)
	}
	released := e.MustRun("review", "release", "--week", "2026-W40", "--state", "held", "--reason", "not at the provider (OPS-150)", "--by", "alice", "--accept-duplicates")
	if !strings.Contains(released.Stdout, "released 2 held receipts") {
		t.Fatalf("release --week: %s", released.Stdout)
	}
	for i, wantHist := range []string{"found at the provider by look-up; outage OPS-150", "duplicates accepted; not at the provider (OPS-150)"} {
		if h := e.MustRun("review", "show", string(keys[i])); !strings.Contains(h.Stdout, wantHist) || !strings.Contains(h.Stdout, "alice") {
			t.Fatalf("the history of %s lacks %q:\n%s", keys[i], wantHist, h.Stdout)
		}
	}

	next := e.MustRun("run", "--week", "2026-W40", "--ambiguous", "hold")
	if next.Count(t, "sent") != 2 {
		t.Fatalf("the run after review sent %d, want the 2 released", next.Count(t, "sent"))
	}
	e.AssertExactlyOnce(want)
	if r := e.Receipts(); r["held"] != 0 || r["sent"] != len(want) {
		t.Fatalf("receipts %v after review", r)
	}
}

// Releasing held receipts needs evidence: "review release" asks the
// look-up first. The one whose message is in Mailpit is marked sent, not
// released, and never sent again; the two the provider does not have are
// released, and the next run sends exactly those. Without a look-up, or
// with one that cannot tell, a maybe-sent receipt is refused (exit 1,
// with the count), in bulk and by key.
func TestReleaseOfHeldNeedsEvidence(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	e.Unset("DIGEST_LOOKUP_URL")
	want := e.Seed(20, week40)
	keys, emails := crashedSends(t, e, 20, 3)
	if held := e.Run("run", "--week", "2026-W40", "--ambiguous", "hold"); held.Code != 4 || held.Count(t, "held") != 3 {
		t.Fatalf("run after the crash: exit %d, held %d; want 4 and 3\n%s", held.Code, held.Count(t, "held"), held.Stderr)
	}
	deliverAsCrashed(t, e, keys[0], emails[0]) // it did reach the provider

	bulk := []string{"review", "release", "--week", "2026-W40", "--state", "held", "--reason", "OPS-151"}
	if r := e.Run(bulk...); r.Code != 1 || !strings.Contains(r.Stderr, "refused to release 3 maybe-sent receipts") || !strings.Contains(r.Stdout, "released 0 held receipts") {
		t.Fatalf("release --week without a look-up: exit %d, want 1 refusing 3\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := e.Run("review", "release", string(keys[1]), "--reason", "OPS-151"); r.Code != 1 || !strings.Contains(r.Stderr, "refused to release 1 maybe-sent receipt") {
		t.Fatalf("release KEY without a look-up: exit %d, want 1\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	down := []string{"DIGEST_LOOKUP_URL=mailpit+http://127.0.0.1:1"}
	if r := e.RunEnv(down, bulk...); r.Code != 1 || !strings.Contains(r.Stderr, "refused to release 3 maybe-sent receipts") || !strings.Contains(r.Stderr, "could not tell (3 failed)") {
		t.Fatalf("release --week with a look-up that cannot tell: exit %d, want 1 refusing 3\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := e.Receipts(); r["held"] != 3 {
		t.Fatalf("receipts %v after refused releases, want 3 still held", r)
	}

	up := []string{"DIGEST_LOOKUP_URL=mailpit+" + e.Mailpit.APIURL()}
	r := e.RunEnv(up, bulk...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "released 2 held receipts") || !strings.Contains(r.Stdout, "1 found at the provider and marked sent") {
		t.Fatalf("release --week with the look-up: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if h := e.MustRun("review", "show", string(keys[0])); !strings.Contains(h.Stdout, "found at the provider by look-up; OPS-151") {
		t.Fatalf("the history of the receipt found at the provider:\n%s", h.Stdout)
	}
	next := e.MustRun("run", "--week", "2026-W40", "--ambiguous", "hold")
	if next.Count(t, "sent") != 2 {
		t.Fatalf("the run after the release sent %d, want the 2 released", next.Count(t, "sent"))
	}
	e.AssertExactlyOnce(want)
}

// lineWithTime reports whether out has a line starting with label that
// holds an RFC 3339 time of 2026 or later (not "-").
func lineWithTime(out, label string) bool {
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, label); ok && strings.Contains(rest, "T") && strings.Contains(rest, "Z") {
			return true
		}
	}
	return false
}

// deliverAsCrashed sends the message a crashed run may have got out: the
// digest key's message, through Mailpit's SMTP, as the mailer would.
func deliverAsCrashed(t *testing.T, e *e2etest.Env, key digest.Key, email string) {
	t.Helper()
	cfg, err := smtp.ParseSMTPURL("smtp://" + e.Mailpit.SMTPAddr() + "?tls=none")
	if err != nil {
		t.Fatal(err)
	}
	m, err := smtp.NewMailer(smtp.Config{SMTP: cfg, From: digest.Address{Email: "digest@bank.example"}, HELO: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	msg := &digest.Message{Key: key, To: digest.Address{Email: email}, Subject: "Your week", Text: "sent before the crash\n"}
	if _, err := m.Send(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
}
