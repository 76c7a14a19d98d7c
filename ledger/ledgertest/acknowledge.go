package ledgertest

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

var ackBy = ledger.Action{By: "oncall", Reason: "email changed after the send (OPS-19)"}

// testAcknowledgeClosesReview: a receipt quarantined after it was sent is
// acknowledged, kept as evidence, counted settled, and no later claim,
// with the new content or yet another, quarantines it again or claims it.
func testAcknowledgeClosesReview(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	k := keys(t, "customer_1")
	sent := send(t, s, k, "ref-1")
	wantOutcome(t, claim1(t, s, req(k, "fp2")), digest.OutcomeQuarantined)
	if c, err := s.Counts(ctx, week); err != nil || c.NeedsReview() != 1 || c.Settled() != 0 {
		t.Fatalf("before: counts %+v (%v): want 1 needing review", c, err)
	}
	clk.Advance(time.Minute)
	if err := s.Acknowledge(ctx, k[0], false, ackBy); err != nil {
		t.Fatalf("acknowledge: %v", err)
	}
	r, events := show(t, s, k[0])
	if r.State != digest.StateAcknowledged || r.Fingerprint != "fp1" || r.ConflictFingerprint != "fp2" ||
		r.ProviderRef != "ref-1" || r.SentAt.IsZero() || r.Sentness() != ledger.Sent {
		t.Fatalf("acknowledged receipt %+v: want the evidence kept", r)
	}
	last := events[len(events)-1]
	if last.From != digest.StateQuarantined || last.To != digest.StateAcknowledged || !last.At.Equal(clk.Now()) ||
		!strings.Contains(last.Detail, `"oncall"`) || !strings.Contains(last.Detail, ackBy.Reason) {
		t.Fatalf("history %+v: want quarantined → acknowledged with who, why and when", last)
	}
	c, err := s.Counts(ctx, week)
	if err != nil {
		t.Fatal(err)
	}
	if c.NeedsReview() != 0 || c.Settled() != 1 || c.ByState[digest.StateAcknowledged] != 1 {
		t.Fatalf("after: counts %+v: want 1 settled (acknowledged), none needing review", c.ByState)
	}
	// Later runs: the new content, the old, and yet another.
	for _, fp := range []string{"fp2", "fp1", "fp3"} {
		clk.Advance(time.Hour)
		res := claim1(t, s, req(k, fp))
		if res.Outcome != digest.OutcomeAlreadySent || res.ProviderRef != "ref-1" {
			t.Errorf("claim with %s: %+v, want already sent as ref-1", fp, res)
		}
		obs, err := s.Observe(ctx, []digest.Observation{{Keys: k, Fingerprint: fp, Week: week, RunID: "obs"}})
		if err != nil || obs[0].Would != digest.OutcomeAlreadySent {
			t.Errorf("observe with %s: %+v %v, want already sent", fp, obs, err)
		}
	}
	after, again := show(t, s, k[0])
	if after.State != digest.StateAcknowledged || len(again) != len(events) || after.Token != sent.Token {
		t.Fatalf("after later claims: %s with %d history rows (was %d), token %d: want unchanged", after.State, len(again), len(events), after.Token)
	}
	if err := s.Acknowledge(ctx, k[0], true, ackBy); !errors.Is(err, ledger.ErrWrongState) {
		t.Errorf("acknowledge twice: %v, want ErrWrongState", err)
	}
	if err := s.Release(ctx, k[0], ackBy); !errors.Is(err, ledger.ErrWrongState) {
		t.Errorf("release of an acknowledged receipt: %v, want ErrWrongState", err)
	}
}

// testAcknowledgeRefusesUnsent: a receipt not known to be sent needs a
// release, so acknowledge refuses it unless told unsent; closed that way
// it is final too, and a claim reports it failed, never claimed.
func testAcknowledgeRefusesUnsent(t *testing.T, be Driver) {
	s, _, _ := fresh(t, be)
	ctx := context.Background()
	never, held, sentOK := keys(t, "customer_1"), keys(t, "customer_2"), keys(t, "customer_3")
	mustClaim(t, s, req(never, "fp1"))
	wantOutcome(t, claim1(t, s, req(never, "fp2")), digest.OutcomeQuarantined)
	hold(t, s, held)
	c := mustClaim(t, s, req(sentOK, "fp1"))
	if err := finish1(t, s, digest.Finish{Key: c.Key, Token: c.Token, State: digest.StateSent, ProviderRef: "ref-3"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		k    []digest.Key
		want ledger.Sentness
	}{{never, ledger.NotSent}, {held, ledger.MaybeSent}} {
		r, _ := show(t, s, tc.k[0])
		if r.Sentness() != tc.want {
			t.Errorf("%s: sentness %q, want %q", r.State, r.Sentness(), tc.want)
		}
		err := s.Acknowledge(ctx, tc.k[0], false, ackBy)
		if !errors.Is(err, ledger.ErrNotSent) {
			t.Errorf("acknowledge %s (%s): %v, want ErrNotSent", r.State, tc.want, err)
		}
		if after, _ := show(t, s, tc.k[0]); after.State != r.State {
			t.Errorf("refused acknowledge moved %s to %s", r.State, after.State)
		}
	}
	if err := s.Acknowledge(ctx, sentOK[0], false, ackBy); !errors.Is(err, ledger.ErrWrongState) {
		t.Errorf("acknowledge of a sent receipt: %v, want ErrWrongState (nothing to review)", err)
	}
	for _, k := range [][]digest.Key{never, held} {
		if err := s.Acknowledge(ctx, k[0], true, ackBy); err != nil {
			t.Fatalf("acknowledge naming unsent: %v", err)
		}
		for _, fp := range []string{"fp1", "fp2"} {
			res := claim1(t, s, req(k, fp))
			if res.Outcome != digest.OutcomeFailed {
				t.Errorf("claim of a receipt closed unsent, %s: %v, want failed (never sent automatically)", fp, res.Outcome)
			}
		}
		if r, ev := show(t, s, k[0]); r.State != digest.StateAcknowledged || !strings.Contains(ev[len(ev)-1].Detail, "closed knowingly") {
			t.Errorf("closed unsent: %s, history %q", r.State, ev[len(ev)-1].Detail)
		}
	}
}

// testAcknowledgeWeek: the bulk form acknowledges the week's sent
// quarantined receipts and leaves the never-sent ones for release.
func testAcknowledgeWeek(t *testing.T, be Driver) {
	s, _, _ := fresh(t, be)
	ctx := context.Background()
	for _, name := range []string{"customer_1", "customer_2"} {
		k := keys(t, name)
		send(t, s, k, "ref-"+name)
		wantOutcome(t, claim1(t, s, req(k, "fp2")), digest.OutcomeQuarantined)
	}
	unsent := keys(t, "customer_3")
	mustClaim(t, s, req(unsent, "fp1"))
	wantOutcome(t, claim1(t, s, req(unsent, "fp2")), digest.OutcomeQuarantined)

	res, err := ledger.AcknowledgeWeek(ctx, s, week, digest.StateQuarantined, false, ackBy)
	if err != nil {
		t.Fatal(err)
	}
	if res.Done != 2 || res.NotSent != 1 || res.Skipped != 0 {
		t.Fatalf("acknowledge week: %+v, want 2 done, 1 not sent", res)
	}
	c, _ := s.Counts(ctx, week)
	if c.ByState[digest.StateAcknowledged] != 2 || c.ByState[digest.StateQuarantined] != 1 {
		t.Fatalf("counts %+v", c.ByState)
	}
	if _, err := ledger.AcknowledgeWeek(ctx, s, week, digest.StateSent, false, ackBy); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("acknowledge week of sent receipts: %v, want ErrInvalid", err)
	}
	res, err = ledger.AcknowledgeWeek(ctx, s, week, digest.StateQuarantined, true, ackBy)
	if err != nil || res.Done != 1 {
		t.Fatalf("acknowledge week naming unsent: %+v %v, want the last one done", res, err)
	}
}

// testAcknowledgedIsPruned: acknowledged receipts are settled, so prune
// takes them without being told to take quarantined ones.
func testAcknowledgedIsPruned(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	k := keys(t, "customer_1")
	send(t, s, k, "ref-1")
	claim1(t, s, req(k, "fp2"))
	if err := s.Acknowledge(ctx, k[0], false, ackBy); err != nil {
		t.Fatal(err)
	}
	clk.Advance(old)
	res, err := s.Prune(ctx, ledger.PruneRequest{Before: clk.Now().Add(-time.Hour)})
	if err != nil || res.Receipts != 1 {
		t.Fatalf("prune: %+v %v, want the acknowledged receipt", res, err)
	}
	if _, _, err := s.Show(ctx, k[0]); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("after prune: %v", err)
	}
}

// testFailedReceiptKeepsAddressKey: a permanent failure stores the
// recipient's address key on the receipt (the bounce → suppression
// runbook reads it); other finishes store none.
func testFailedReceiptKeepsAddressKey(t *testing.T, be Driver) {
	s, _, _ := fresh(t, be)
	ctx := context.Background()
	failed, sent := keys(t, "customer_1"), keys(t, "customer_2")
	batch := []digest.Finish{}
	for _, k := range [][]digest.Key{failed, sent} {
		c := mustClaim(t, s, req(k, "fp1"))
		batch = append(batch, digest.Finish{Key: c.Key, Token: c.Token, RunID: "run-1", AddressKey: "a1:0123abcd"})
	}
	batch[0].State, batch[0].Reason = digest.StateFailed, "permanent: reply 550"
	batch[1].State, batch[1].ProviderRef = digest.StateSent, "ref-2"
	// Batched (the many-row statement) and one by one (the single-row one).
	for _, fs := range [][]digest.Finish{batch, {batch[0]}} {
		if fs[0].Key == batch[0].Key && len(fs) == 1 {
			c := mustClaim(t, s, req(keys(t, "customer_3"), "fp1"))
			fs[0] = digest.Finish{Key: c.Key, Token: c.Token, State: digest.StateFailed, Reason: "permanent", AddressKey: "a1:4567ef"}
		}
		errs, err := s.Finish(ctx, fs)
		if err != nil || errs[0] != nil {
			t.Fatalf("finish: %v %v", err, errs)
		}
	}
	for _, tc := range []struct {
		k    []digest.Key
		want string
	}{{failed, "a1:0123abcd"}, {sent, ""}, {keys(t, "customer_3"), "a1:4567ef"}} {
		r, _ := show(t, s, tc.k[0])
		if r.AddressKey != tc.want {
			t.Errorf("%s receipt: address key %q, want %q", r.State, r.AddressKey, tc.want)
		}
	}
	list, err := s.List(ctx, ledger.ListFilter{State: digest.StateFailed, Week: week})
	if err != nil || len(list) != 2 || list[0].AddressKey == "" || list[1].AddressKey == "" {
		t.Fatalf("list failed: %+v %v, want both with their address keys", list, err)
	}
}

// testAcknowledgedUndoneByDowngrade: "migrate --down-to" before the
// acknowledged state puts an acknowledged receipt back where it was
// (quarantined: waiting for review, as an older binary understands it),
// with a history row saying why; migrating up again works on it.
func testAcknowledgedUndoneByDowngrade(t *testing.T, be Driver) {
	s, _, cfg := fresh(t, be)
	ctx := context.Background()
	k := keys(t, "customer_1")
	send(t, s, k, "ref-1")
	claim1(t, s, req(k, "fp2"))
	if err := s.Acknowledge(ctx, k[0], false, ackBy); err != nil {
		t.Fatal(err)
	}
	before := int64(5) // SQLite: 00007 made acknowledged
	if cfg.URL != "" {
		before = 6 // PostgreSQL: 00008
	}
	if err := s.MigrateDownTo(ctx, before); err != nil {
		t.Fatalf("migrate down to %d: %v", before, err)
	}
	var state, detail string
	q := `SELECT r.state, e.detail FROM receipts r JOIN receipt_events e ON e.key = r.key
		WHERE r.key = '` + string(k[0]) + `' ORDER BY e.id DESC LIMIT 1`
	if cfg.URL == "" {
		db, err := sql.Open("sqlite", "file:"+cfg.Path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.QueryRowContext(ctx, q).Scan(&state, &detail); err != nil {
			t.Fatal(err)
		}
	} else {
		conn, err := pgx.Connect(ctx, cfg.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if err := conn.QueryRow(ctx, q).Scan(&state, &detail); err != nil {
			t.Fatal(err)
		}
	}
	if state != string(digest.StateQuarantined) || !strings.Contains(detail, "downgrade") {
		t.Fatalf("after the downgrade: %q, last history %q; want quarantined, saying why", state, detail)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Acknowledge(ctx, k[0], false, ackBy); err != nil {
		t.Fatalf("acknowledge again after migrating up: %v", err)
	}
}
