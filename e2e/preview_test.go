package e2e

import (
	"bytes"
	"context"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/e2etest"
	"github.com/weeklydigest/digest/sender"
	"github.com/weeklydigest/digest/sender/mailpit"
	"github.com/weeklydigest/digest/snapshot"
	"github.com/weeklydigest/digest/unsubscribe"
)

var spec40 = digest.Spec{Week: week40, Location: time.UTC, Type: "weekly_activity", Version: "v1"}

// firstActive returns the first synthetic customer (of n) with activity in
// week40, and the message a run renders for them (with unsubscribeKeys'
// one-click URL at https://bank.example/u/{token}, which the body shows).
func firstActive(t *testing.T, n int) (digest.Record, *digest.Message) {
	t.Helper()
	kr, err := digest.ParseKeyring(e2etest.TestKeyring)
	if err != nil {
		t.Fatal(err)
	}
	r, err := digest.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	unsub, err := unsubscribe.ParseKeyring(unsubscribeKeys)
	if err != nil {
		t.Fatal(err)
	}
	for rec := range snapshot.Synthetic(n, week40, 1) {
		d, err := digest.Build(rec, spec40)
		if err != nil || d.Empty() {
			continue
		}
		msg, err := r.Message(&d, kr.Key(d.Identity), "https://bank.example/u/"+unsub.Token(d.Customer.ID))
		if err != nil {
			t.Fatal(err)
		}
		return rec, msg
	}
	t.Fatal("no synthetic customer with activity")
	return digest.Record{}, nil
}

// countRows counts a table's rows in the Env's schema.
func countRows(t *testing.T, e *e2etest.Env, table string) int {
	t.Helper()
	var n int
	if err := e.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// "digest preview" renders what a run would send, pins nothing, claims
// nothing, sends nothing; once a run has pinned the week, it reads the
// week at the pinned cutoff (activity recorded later is not shown).
func TestPreviewRendersWithoutPinning(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	e.Set("DIGEST_UNSUBSCRIBE_URL", "https://bank.example/u/{token}")
	e.Set("DIGEST_UNSUBSCRIBE_KEYS", unsubscribeKeys)
	e.Seed(10, week40)
	rec, want := firstActive(t, 10)
	htmlPath, emlPath := filepath.Join(e.Dir, "d.html"), filepath.Join(e.Dir, "d.eml")

	p := e.MustRun("preview", "--customer", rec.Customer.ID, "--week", "2026-W40", "--html", htmlPath, "--eml", emlPath)
	if p.Stdout != want.Text {
		t.Fatalf("preview printed:\n%s\nwant the text part:\n%s", p.Stdout, want.Text)
	}
	if html, err := os.ReadFile(htmlPath); err != nil || string(html) != want.HTML {
		t.Fatalf("--html wrote %d bytes (%v), want the HTML part", len(html), err)
	}
	raw, err := os.ReadFile(emlPath)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("--eml: %v", err)
	}
	if msg.Header.Get(sender.HeaderKey) != string(want.Key) || !strings.Contains(msg.Header.Get("To"), rec.Customer.Email) ||
		msg.Header.Get("Message-Id") != "<"+sender.MessageID(want.Key, "bank.example")+">" {
		t.Fatalf("--eml headers: %v", msg.Header)
	}
	if pins, receipts := countRows(t, e, "snapshot_pins"), countRows(t, e, "receipts"); pins != 0 || receipts != 0 || e.MailpitCount() != 0 {
		t.Fatalf("preview left %d pins, %d receipts, %d messages; want none", pins, receipts, e.MailpitCount())
	}

	if r := e.Run("preview", "--customer", "cust_9999999", "--week", "2026-W40"); r.Code != 2 || !r.Says(`customer "cust_9999999" is not in the source`) {
		t.Fatalf("unknown customer: exit %d, want 2 naming it\n%s", r.Code, r.Stderr)
	}

	// A run pins the week and sends the message the preview showed.
	e.MustRun("run", "--week", "2026-W40")
	sent := mailpitMessage(t, e, want.Key)
	for _, h := range []string{"Message-Id", "X-Digest-Key", "Subject", "From", "To", "List-Unsubscribe", "List-Unsubscribe-Post"} {
		if sent.Header.Get(h) != msg.Header.Get(h) || (h == "List-Unsubscribe" && !strings.Contains(sent.Header.Get(h), "https://bank.example/u/")) {
			t.Errorf("%s: preview --eml %q, sent %q", h, msg.Header.Get(h), sent.Header.Get(h))
		}
	}

	// Activity recorded after the pinned cutoff is not the week's.
	_, err = e.Pool.Exec(context.Background(), `INSERT INTO digest_activity (customer_id, occurred_at, recorded_at, kind, amount_minor, currency, description)
VALUES ($1, $2, now() + interval '1 minute', 'fee', -999, 'EUR', 'Late fee')`, rec.Customer.ID, week40.Start(time.UTC).Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if again := e.MustRun("preview", "--customer", rec.Customer.ID, "--week", "2026-W40"); again.Stdout != want.Text {
		t.Fatalf("preview of the pinned week shows activity recorded after its cutoff:\n%s", again.Stdout)
	}
}

// "digest send-test" sends a sample of real digests to one address,
// marked as tests, outside the ledger; a look-up of a real digest's key
// never finds a test.
func TestSendTestIsMarkedAndOutsideTheLedger(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(10, week40)
	out := e.MustRun("send-test", "--to", "qa@example.com", "--sample", "3", "--week", "2026-W40")
	if !strings.Contains(out.Stdout, "sent 3 test digests") {
		t.Fatalf("send-test: %s", out.Stdout)
	}
	ctx := context.Background()
	msgs, err := e.Mailpit.Messages(ctx)
	if err != nil || len(msgs) != 3 {
		t.Fatalf("Mailpit holds %d messages (%v), want 3", len(msgs), err)
	}
	for _, m := range msgs {
		raw, err := e.Mailpit.Raw(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		h, err := mail.ReadMessage(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if h.Header.Get("X-Digest-Test") != "1" || !strings.HasPrefix(m.Subject, "[TEST] ") || !strings.Contains(h.Header.Get("To"), "qa@example.com") ||
			!strings.HasPrefix(h.Header.Get(sender.HeaderKey), digest.TestKeyID+":") {
			t.Fatalf("test message %q: To %q, X-Digest-Test %q, key %q", m.Subject, h.Header.Get("To"), h.Header.Get("X-Digest-Test"), h.Header.Get(sender.HeaderKey))
		}
	}
	if receipts, pins := countRows(t, e, "receipts"), countRows(t, e, "snapshot_pins"); receipts != 0 || pins != 0 {
		t.Fatalf("send-test left %d receipts and %d pins, want none", receipts, pins)
	}
	lk := mailpit.New(mailpit.Config{Base: e.Mailpit.APIURL()})
	_, real := firstActive(t, 10)
	if _, found, err := lk.Lookup(ctx, real.Key); err != nil || found {
		t.Fatalf("look-up of a real key found a test (%v, %v)", found, err)
	}
	run := e.MustRun("run", "--week", "2026-W40")
	if run.Count(t, "sent") != len(want) {
		t.Fatalf("the real run sent %d, want %d", run.Count(t, "sent"), len(want))
	}
	if r := e.Run("send-test", "--to", "not an address", "--week", "2026-W40"); r.Code != 2 || !strings.Contains(r.Stderr, "--to: invalid email address") {
		t.Fatalf("send-test --to 'not an address': exit %d, want 2\n%s", r.Code, r.Stderr)
	}
}

// mailpitMessage returns the message Mailpit holds for key.
func mailpitMessage(t *testing.T, e *e2etest.Env, key digest.Key) *mail.Message {
	t.Helper()
	ctx := context.Background()
	msgs, err := e.Mailpit.Messages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		raw, err := e.Mailpit.Raw(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if msg, err := mail.ReadMessage(bytes.NewReader(raw)); err == nil && msg.Header.Get(sender.HeaderKey) == string(key) {
			return msg
		}
	}
	t.Fatalf("Mailpit holds no message for %s", key)
	return nil
}

// "digest preview" of a customer in a snapshot out of order names the
// line that breaks the order, instead of saying the customer is not in
// the source.
func TestPreviewNamesOutOfOrderLine(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	path := filepath.Join(e.Dir, "unsorted.jsonl")
	lines := `{"customer_id":"cust_b","email":"b@example.com","locale":"en-US","activity":[]}
{"customer_id":"cust_a","email":"a@example.com","locale":"en-US","activity":[]}
`
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.Run("preview", "--snapshot", path, "--customer", "cust_a", "--week", "2026-W48")
	if r.Code != 1 || !strings.Contains(r.Stderr, path+":2") || !strings.Contains(r.Stderr, "must be sorted by customer_id") || strings.Contains(r.Stderr, "not in the source") {
		t.Fatalf("preview of a customer out of order: exit %d, want 1 naming line 2\n%s", r.Code, r.Stderr)
	}
	if r := e.Run("preview", "--snapshot", path, "--customer", "cust_z", "--week", "2026-W48"); r.Code != 2 || !r.Says(`customer "cust_z" is not in the source`) {
		t.Fatalf("an absent customer: exit %d, want 2\n%s", r.Code, r.Stderr)
	}
}
