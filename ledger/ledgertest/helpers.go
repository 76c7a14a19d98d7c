package ledgertest

import (
	"context"
	"encoding/base64"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// clock is a test clock that moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock {
	return &clock{now: time.Date(2026, time.August, 10, 6, 0, 0, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

var week = digest.ISOWeek{Year: 2026, Week: 32}

func keyring(t testing.TB, ids ...string) *digest.Keyring {
	t.Helper()
	var entries []string
	for _, id := range ids {
		secret := strings.Repeat(id, 32)[:32]
		entries = append(entries, id+":"+base64.StdEncoding.EncodeToString([]byte(secret)))
	}
	kr, err := digest.ParseKeyring(strings.Join(entries, ","))
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// identity returns a business identity for a customer name.
func identity(customer string) digest.Identity {
	return digest.Identity{Customer: customer, Week: week, Type: "weekly_activity", Version: "v3"}
}

// keys returns the candidate keys of a customer's digest under the "k1" keyring.
func keys(t testing.TB, customer string) []digest.Key {
	t.Helper()
	return keyring(t, "k1").Candidates(identity(customer))
}

func req(keys []digest.Key, fp string) digest.ClaimRequest {
	return digest.ClaimRequest{Keys: keys, Fingerprint: fp, Week: week, RunID: "run-1", Lease: time.Minute}
}

func claim1(t testing.TB, s ledger.Store, r digest.ClaimRequest) digest.ClaimResult {
	t.Helper()
	res, err := s.Claim(context.Background(), []digest.ClaimRequest{r})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return res[0]
}

func mustClaim(t testing.TB, s ledger.Store, r digest.ClaimRequest) digest.ClaimResult {
	t.Helper()
	res := claim1(t, s, r)
	if res.Outcome != digest.OutcomeClaimed {
		t.Fatalf("claim %s: outcome %v, want claimed", r.Keys[0], res.Outcome)
	}
	return res
}

func wantOutcome(t testing.TB, got digest.ClaimResult, want digest.Outcome) {
	t.Helper()
	if got.Outcome != want {
		t.Fatalf("outcome %v, want %v (result %+v)", got.Outcome, want, got)
	}
}

func finish1(t testing.TB, s ledger.Store, f digest.Finish) error {
	t.Helper()
	errs, err := s.Finish(context.Background(), []digest.Finish{f})
	if err != nil {
		t.Fatalf("finish: %v", err)
	}
	return errs[0]
}

func start1(t testing.TB, s ledger.Store, key digest.Key, token int64) error {
	t.Helper()
	errs, err := s.StartSending(context.Background(), []digest.Fence{{Key: key, Token: token}})
	if err != nil {
		t.Fatalf("start sending: %v", err)
	}
	return errs[0]
}

func show(t testing.TB, s ledger.Store, key digest.Key) (ledger.Receipt, []ledger.Event) {
	t.Helper()
	r, ev, err := s.Show(context.Background(), key)
	if err != nil {
		t.Fatalf("show: %v", err)
	}
	return r, ev
}

// send claims k and finishes it sent as ref, returning the claim.
func send(t testing.TB, s ledger.Store, k []digest.Key, ref string) digest.ClaimResult {
	t.Helper()
	c := mustClaim(t, s, req(k, "fp1"))
	if err := finish1(t, s, digest.Finish{Key: c.Key, Token: c.Token, State: digest.StateSent, ProviderRef: ref}); err != nil {
		t.Fatalf("finish sent: %v", err)
	}
	return c
}
