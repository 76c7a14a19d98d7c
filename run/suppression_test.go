package run_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/sqlite"
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
	return "", &digest.SendError{Class: digest.SendPermanent, Err: errors.New("550 5.1.1 <" + strings.ToUpper(m.To.Email) + ">: mailbox unavailable")}
}

func (rejecting) Close() error { return nil }

// The ledger's suppression list is honoured before claiming: a customer
// suppressed by id (under a key id since rotated out of first place) and
// one suppressed by address get nothing, are counted as suppressed, and
// leave no receipt; the look-up is one call per batch, not per customer.
func TestLedgerSuppressionSkipsBeforeClaim(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 40)
	ctx := context.Background()
	var withActivity []digest.Customer
	for rec := range snapshot.Synthetic(40, runWeek, 1) {
		if len(rec.Activity) > 0 {
			withActivity = append(withActivity, rec.Customer)
		}
	}
	byID, byAddress := withActivity[3], withActivity[11]
	if _, err := f.store.Suppress(ctx, ledger.Suppression{Keys: f.kr.CustomerKeys(byID.ID), Subject: digest.SubjectCustomer,
		Reason: digest.ReasonUnsubscribe, Source: "one-click"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Suppress(ctx, ledger.Suppression{Keys: f.kr.AddressKeys(strings.ToUpper(byAddress.Email)), Subject: digest.SubjectAddress,
		Reason: digest.ReasonHardBounce, Source: "test"}); err != nil {
		t.Fatal(err)
	}
	rotated, err := digest.ParseKeyring("k2:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=," + "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	if err != nil {
		t.Fatal(err)
	}
	p := newProvider()
	r := f.runner(p, p, nil)
	r.Keyring = rotated
	counted := &countingLedger{Store: f.store}
	r.Ledger = counted
	sum := f.run(r)
	if sum.Suppressed != 2 || sum.Sent != f.want-2 || !sum.Complete() {
		t.Fatalf("summary %+v; want 2 suppressed and %d sent", sum, f.want-2)
	}
	for _, c := range []digest.Customer{byID, byAddress} {
		key := rotated.Key(digest.Identity{Customer: c.ID, Week: runWeek, Type: "weekly_activity", Version: "v1"})
		if p.sends[key] > 0 {
			t.Errorf("%s was sent a digest", c.ID)
		}
	}
	var total int64
	for _, n := range f.states() {
		total += n
	}
	if total != int64(f.want-2) {
		t.Fatalf("%d receipts; want %d: a suppressed customer was claimed", total, f.want-2)
	}
	// Every look-up either preceded a claim of its batch or found the
	// whole batch suppressed: one per batch, never one per customer.
	if s, c := counted.suppressedCalls.Load(), counted.claimCalls.Load(); s > c+2 || s == 0 {
		t.Fatalf("%d suppression look-ups for %d claim batches", s, c)
	}
}

// countingLedger counts the suppression look-ups and the claim batches.
type countingLedger struct {
	*sqlite.Store
	suppressedCalls, claimCalls atomic.Int64
}

func (l *countingLedger) Suppressed(ctx context.Context, keys []digest.SuppressionKey) (map[digest.SuppressionKey]bool, error) {
	l.suppressedCalls.Add(1)
	return l.Store.Suppressed(ctx, keys)
}

func (l *countingLedger) Claim(ctx context.Context, reqs []digest.ClaimRequest) ([]digest.ClaimResult, error) {
	l.claimCalls.Add(1)
	return l.Store.Claim(ctx, reqs)
}
