package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger/sqlite"
)

// A quarantined receipt that was never sent needs a release, not an
// acknowledgement: review list and show say "not sent" and name release,
// acknowledge refuses it (exit 1, saying why) unless --unsent closes it
// knowingly.
func TestReviewAcknowledgeRefusesUnsentWithoutTheFlag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	store, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	kr, err := digest.ParseKeyring(testKeys)
	if err != nil {
		t.Fatal(err)
	}
	w := digest.ISOWeek{Year: 2026, Week: 40}
	keys := kr.Candidates(digest.Identity{Customer: "cust_1", Week: w, Type: "weekly_activity", Version: "v1"})
	for _, fp := range []string{"fp1", "fp2"} { // claimed, then another fingerprint: quarantined, never sent
		if _, err := store.Claim(ctx, []digest.ClaimRequest{{Keys: keys, Fingerprint: fp, Week: w, RunID: "r", Lease: time.Minute}}); err != nil {
			t.Fatal(err)
		}
	}
	key := string(keys[0])
	vars := map[string]string{"DIGEST_LEDGER_PATH": path}

	_, list, _ := runMain(t, vars, "review", "list")
	if line := lineOf(list, key); !strings.Contains(line, "quarantined") || !strings.Contains(line, "not sent") {
		t.Fatalf("review list row should say quarantined and not sent:\n%s", list)
	}
	if _, show, _ := runMain(t, vars, "review", "show", key); !strings.Contains(show, "not sent (digest review release)") {
		t.Fatalf("review show should say not sent and name release:\n%s", show)
	}
	code, _, stderr := runMain(t, vars, "review", "acknowledge", key, "--reason", "customer left")
	if code != ExitFailure || !strings.Contains(stderr, "release it") {
		t.Fatalf("acknowledge of a never-sent receipt: exit %d, %q; want %d naming release", code, stderr, ExitFailure)
	}
	code, out, _ := runMain(t, vars, "review", "acknowledge", "--week", "2026-W40", "--state", "quarantined", "--reason", "customer left")
	if code != ExitOK || !strings.Contains(out, "acknowledged 0") || !strings.Contains(out, "1 not (or maybe not) sent left quarantined") {
		t.Fatalf("bulk acknowledge without --unsent: exit %d, %q", code, out)
	}
	if code, _, stderr := runMain(t, vars, "review", "acknowledge", key, "--reason", "customer left (OPS-7)", "--unsent", "--by", "bob"); code != ExitOK {
		t.Fatalf("acknowledge --unsent: exit %d, %s", code, stderr)
	}
	r, events, err := store.Show(ctx, keys[0])
	if err != nil || r.State != digest.StateAcknowledged {
		t.Fatalf("after acknowledge --unsent: %+v %v", r, err)
	}
	if d := events[len(events)-1].Detail; !strings.Contains(d, "not sent") || !strings.Contains(d, `"bob"`) || !strings.Contains(d, "OPS-7") {
		t.Fatalf("history %q: want not sent, who and why", d)
	}
}

func lineOf(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// Issue 35: review show says whether the message was sent in words (not
// "sent sent", "maybe sent true") and tells the history one line per
// event, each with its time, in plain words.
func TestReviewShowTellsAReadableHistory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	vars := map[string]string{"DIGEST_LEDGER_PATH": filepath.Join(dir, "l.db"), "DIGEST_OUTBOX_DIR": filepath.Join(dir, "o"), "DIGEST_HMAC_KEYS": testKeys, "DIGEST_TZ": "UTC"}
	if code, _, errOut := runMain(t, vars, "run", "--week", "2026-W48", "--snapshot", "../../examples/snapshot.jsonl"); code != ExitOK {
		t.Fatalf("run: exit %d\n%s", code, errOut)
	}
	_, key, _ := runMain(t, vars, "key", "--customer", "cust_0001", "--week", "2026-W48")
	code, show, errOut := runMain(t, vars, "review", "show", strings.TrimSpace(key))
	if code != ExitOK {
		t.Fatalf("review show: exit %d\n%s", code, errOut)
	}
	for _, bad := range []*regexp.Regexp{regexp.MustCompile(`(?m)^sent\s+sent$`), regexp.MustCompile(`(?m)^maybe sent\s+(true|false)$`), regexp.MustCompile(`->`)} {
		if bad.MatchString(show) {
			t.Errorf("review show prints %s:\n%s", bad, show)
		}
	}
	if !regexp.MustCompile(`(?m)^message\s+sent$`).MatchString(show) {
		t.Errorf("review show does not say the message was sent:\n%s", show)
	}
	_, history, ok := strings.Cut(show, "history, oldest first:\n")
	if !ok {
		t.Fatalf("review show has no history:\n%s", show)
	}
	event := regexp.MustCompile(`^  \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  \S`)
	lines := strings.Split(strings.TrimRight(history, "\n"), "\n")
	for _, l := range lines {
		if !event.MatchString(l) {
			t.Errorf("history line without its time: %q", l)
		}
	}
	for _, want := range []string{"new receipt, claimed (run ", "still claimed: send started (run ", "claimed to sent"} {
		if !strings.Contains(history, want) {
			t.Errorf("history does not say %q:\n%s", want, history)
		}
	}
}

// Issue 35: after a customer's address changes under a sent digest, the
// quarantine's history says the address changed, and shows neither
// address.
func TestQuarantineHistorySaysTheAddressChanged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	snap := filepath.Join(dir, "week.jsonl")
	orig, err := os.ReadFile("../../examples/snapshot.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(snap, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"DIGEST_LEDGER_PATH": filepath.Join(dir, "l.db"), "DIGEST_OUTBOX_DIR": filepath.Join(dir, "o"), "DIGEST_HMAC_KEYS": testKeys, "DIGEST_TZ": "UTC"}
	args := []string{"run", "--week", "2026-W48", "--snapshot", snap}
	if code, _, errOut := runMain(t, vars, args...); code != ExitOK {
		t.Fatalf("run: exit %d\n%s", code, errOut)
	}
	const old, changed = "zoe.mueller@example.com", "zoe.new@example.com"
	if err := os.WriteFile(snap, bytes.Replace(orig, []byte(old), []byte(changed), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runMain(t, vars, args...); code != ExitReview {
		t.Fatalf("run after the address changed: exit %d, want %d\n%s", code, ExitReview, errOut)
	}
	_, key, _ := runMain(t, vars, "key", "--customer", "cust_0001", "--week", "2026-W48")
	_, show, _ := runMain(t, vars, "review", "show", strings.TrimSpace(key))
	line := lineOf(show, "to quarantined")
	if !strings.Contains(line, "changed: address") || strings.Contains(line, "content") || strings.Contains(line, "name") {
		t.Errorf("the quarantine's history does not say the address (only) changed: %q\n%s", line, show)
	}
	if strings.Contains(show, old) || strings.Contains(show, changed) {
		t.Errorf("review show prints an address:\n%s", show)
	}
}
