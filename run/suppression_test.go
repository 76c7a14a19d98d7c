package run_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/snapshot"
)

// Every permanent rejection is logged, at the shipped info level, with the
// key of the address (an HMAC), never the address, so it can be fed back
// into suppression; the failed receipt keeps the key too, and its last
// error has no address.
func TestPermanentRejectionReportsAddressKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 6)
	p := newProvider()
	var logs bytes.Buffer
	r := f.runner(p, p, func(c *run.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	r.Mailer = rejecting{} // whose replies repeat the address, as SMTP servers' do
	if sum := f.run(r); sum.Failed != f.want {
		t.Fatalf("summary %+v", sum)
	}
	wantKeys := map[string]bool{}
	for rec := range snapshot.Synthetic(6, runWeek, 1) {
		if len(rec.Activity) > 0 {
			wantKeys[f.kr.AddressKey(rec.Customer.Email)] = true
		}
	}
	n := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(line, "send failed permanently") {
			continue
		}
		n++
		if strings.Contains(line, "@") {
			t.Errorf("log line shows an address: %s", line)
		}
		var entry struct {
			AddressKey string `json:"address_key"`
		}
		if err := json.Unmarshal([]byte(line), &entry); err != nil || !wantKeys[entry.AddressKey] {
			t.Errorf("address_key %q is not the key of a rejected address (%v)", entry.AddressKey, err)
		}
	}
	if n != f.want || len(wantKeys) != f.want {
		t.Fatalf("%d permanent-failure lines, want %d:\n%s", n, f.want, logs.String())
	}
	failed, err := f.store.List(context.Background(), ledger.ListFilter{State: digest.StateFailed})
	if err != nil || len(failed) != f.want {
		t.Fatalf("failed receipts %d (%v), want %d", len(failed), err, f.want)
	}
	for _, rc := range failed {
		if !wantKeys[rc.AddressKey] || strings.Contains(rc.LastError, "@") || !strings.Contains(rc.LastError, "<address>") {
			t.Errorf("failed receipt %s: address key %q, last error %q; want a rejected address's key and the address redacted", rc.Key, rc.AddressKey, rc.LastError)
		}
	}
	// The key names the address, in any case, under the current secret.
	want := f.kr.AddressKey("Cust_00001@Example.com")
	if want != f.kr.AddressKey("cust_00001@example.com") || !strings.HasPrefix(want, "k1:") || len(want) != 3+64 {
		t.Fatalf("AddressKey = %q", want)
	}
	if f.kr.AddressKey("a@example.com") == f.kr.AddressKey("b@example.com") {
		t.Fatal("two addresses share a key")
	}
}

// rejecting refuses every message with a 5xx that names the recipient.
type rejecting struct{}

func (rejecting) Send(_ context.Context, m *digest.Message) (string, error) {
	return "", &digest.SendError{Class: digest.ClassPermanent, Err: errors.New("550 5.1.1 <" + strings.ToUpper(m.To.Email) + ">: mailbox unavailable")}
}

func (rejecting) Close() error { return nil }
