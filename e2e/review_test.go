package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/e2etest"
	"github.com/weeklydigest/digest/ledger/postgres"
	"github.com/weeklydigest/digest/snapshot"
)

// An operator's day: a crashed run left two sends that may have reached
// the provider; with no look-up the next run holds them (exit 4); the
// operator finds one at the provider and marks it sent, releases the
// other (the release asks the look-up, which has no such message), and
// the next run sends exactly that one.
func TestReviewHeldRowsMarkSentAndRelease(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	e.Unset("DIGEST_LOOKUP_URL")
	want := e.Seed(20, week40)

	// The crashed run: two claims marked as sending, never finished.
	keys, emails := crashedSends(t, e, 20, 2)

	held := e.Run("run", "--week", "2026-W40", "--ambiguous", "hold")
	if held.Code != 4 || held.Count(t, "held") != 2 {
		t.Fatalf("run after the crash: exit %d, held %d; want 4 and 2\n%s", held.Code, held.Count(t, "held"), held.Stderr)
	}
	list := e.MustRun("review", "list")
	for _, k := range keys {
		if !strings.Contains(list.Stdout, string(k)) {
			t.Fatalf("review list misses %s:\n%s", k, list.Stdout)
		}
	}
	show := e.MustRun("review", "show", string(keys[0]))
	for _, s := range []string{"state", "held", "send started", "history, oldest first:", "crashed"} {
		if !strings.Contains(show.Stdout, s) {
			t.Fatalf("review show lacks %q:\n%s", s, show.Stdout)
		}
	}

	if r := e.Run("review", "release", string(keys[1])); r.Code != 2 {
		t.Fatalf("release without --reason: exit %d, want 2", r.Code)
	}
	e.MustRun("review", "mark-sent", string(keys[0]), "--ref", "provider-123", "--reason", "found in provider activity", "--by", "alice")
	rel := e.RunEnv([]string{"DIGEST_LOOKUP_URL=mailpit+" + e.Mailpit.APIURL()}, "review", "release", string(keys[1]), "--reason", "not in provider logs", "--by", "alice")
	if rel.Code != 0 || !strings.Contains(rel.Stdout, "released "+string(keys[1])) {
		t.Fatalf("release of a held receipt the look-up does not find: exit %d\n%s%s", rel.Code, rel.Stdout, rel.Stderr)
	}
	if r := e.Run("review", "release", string(keys[0]), "--reason", "again"); r.Code != 1 || !strings.Contains(r.Stderr, "wrong state") {
		t.Fatalf("releasing a sent receipt: exit %d, %q; want 1 and a wrong-state error", r.Code, r.Stderr)
	}

	next := e.MustRun("run", "--week", "2026-W40", "--ambiguous", "hold")
	if next.Count(t, "sent") != 1 {
		t.Fatalf("the run after review sent %d, want the released one", next.Count(t, "sent"))
	}
	delete(want, emails[0]) // marked sent by the operator: found at the provider, not sent by us
	e.AssertExactlyOnce(want)
	if r := e.Receipts(); r["held"] != 0 || r["sent"] != len(want)+1 {
		t.Fatalf("receipts %v after review", r)
	}
	after := e.MustRun("review", "show", string(keys[0]))
	for _, s := range []string{"provider-123", "alice", "found in provider activity"} {
		if !strings.Contains(after.Stdout, s) {
			t.Fatalf("the history does not record %q:\n%s", s, after.Stdout)
		}
	}
	if nothing := e.MustRun("review", "list"); !strings.Contains(nothing.Stdout, "nothing waits for review") {
		t.Fatalf("review list after review:\n%s", nothing.Stdout)
	}
}

// crashedSends leaves what a run that crashed mid-send leaves: n claims of
// the first customers (of seeded) with activity, marked as sending, never
// finished, with a lease that has already expired. It returns their keys
// and the customers' emails.
func crashedSends(t *testing.T, e *e2etest.Env, seeded, n int) ([]digest.Key, []string) {
	t.Helper()
	kr, err := digest.ParseKeyring(e2etest.TestKeyring)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := postgres.NewPool(context.Background(), e.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := postgres.New(pool, postgres.Config{})
	var keys []digest.Key
	var emails []string
	spec := digest.Spec{Week: week40, Location: time.UTC, Type: "weekly_activity", Version: "v1"}
	for r := range snapshot.Synthetic(seeded, week40, 1) {
		d, err := digest.Build(r, spec)
		if err != nil || d.Empty() || len(keys) == n {
			continue
		}
		res, err := store.Claim(context.Background(), []digest.ClaimRequest{{
			Keys: kr.Candidates(d.Identity), Fingerprint: d.Fingerprint(), Week: week40, RunID: "crashed", Lease: time.Millisecond,
		}})
		if err != nil || res[0].Outcome != digest.OutcomeClaimed {
			t.Fatalf("claim: %v %v", res, err)
		}
		if errs, err := store.StartSending(context.Background(), []digest.Fence{{Key: res[0].Key, Token: res[0].Token}}); err != nil || errs[0] != nil {
			t.Fatalf("start sending: %v %v", errs, err)
		}
		keys = append(keys, res[0].Key)
		emails = append(emails, r.Customer.Email)
	}
	return keys, emails
}
