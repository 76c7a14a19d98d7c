package ledgertest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

func testPinSnapshot(t *testing.T, be Driver) {
	s, clk, cfg := fresh(t, be)
	ctx := context.Background()
	pin := digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v3"}
	first := clk.Now().Add(-time.Hour)
	const n = 8
	got := make([]digest.WeekPin, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		other := open(t, be, cfg, clk)
		// Each run proposes its own cutoff, zone and key id: one wins for all.
		proposed := digest.WeekPin{AsOf: first.Add(time.Duration(i) * time.Second), Zone: fmt.Sprintf("Zone/%d", i), KeyID: fmt.Sprintf("k%d", i)}
		wg.Go(func() { got[i], errs[i] = other.PinSnapshot(ctx, pin, proposed) })
	}
	wg.Wait()
	same := func(a, b digest.WeekPin) bool { return a.AsOf.Equal(b.AsOf) && a.Zone == b.Zone && a.KeyID == b.KeyID }
	for i := range n {
		if errs[i] != nil || !same(got[i], got[0]) {
			t.Fatalf("pin %d: %+v %v, want all equal to %+v", i, got[i], errs[i], got[0])
		}
	}
	later, err := s.PinSnapshot(ctx, pin, digest.WeekPin{AsOf: clk.Now(), Zone: "Europe/Berlin", KeyID: "k9"})
	if err != nil || !same(later, got[0]) {
		t.Fatalf("later run: %+v %v, want %+v", later, err, got[0])
	}
	pin.Version = "v4"
	v4, err := s.PinSnapshot(ctx, pin, digest.WeekPin{AsOf: clk.Now(), Zone: "Europe/Berlin", KeyID: "k9"})
	if err != nil || !v4.AsOf.Equal(clk.Now()) || v4.Zone != "Europe/Berlin" || v4.KeyID != "k9" {
		t.Fatalf("new pin: %+v %v", v4, err)
	}
}

func testObserve(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	absent, sent := keys(t, "customer_1"), keys(t, "customer_2")
	send(t, s, sent, "")
	observe := func(k []digest.Key, fp string) digest.Observed {
		t.Helper()
		out, err := s.Observe(ctx, []digest.Observation{{Keys: k, Fingerprint: fp, Week: week, RunID: "observe"}})
		if err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	t0 := clk.Now()
	if o := observe(absent, "fp1"); o.Would != digest.OutcomeClaimed || !o.PreviousAt.IsZero() {
		t.Fatalf("first observation %+v", o)
	}
	for _, gap := range []time.Duration{time.Minute, 2 * time.Hour, 3 * 24 * time.Hour, 60 * 24 * time.Hour} {
		clk.Advance(gap)
		if o := observe(absent, "fp1"); !o.PreviousAt.Equal(t0) {
			t.Fatalf("previous %v, want %v", o.PreviousAt, t0)
		}
		t0 = clk.Now()
	}
	if _, _, err := s.Show(ctx, absent[0]); err == nil {
		t.Fatal("observe created a receipt")
	}
	if o := observe(sent, "fp1"); o.Would != digest.OutcomeAlreadySent {
		t.Fatalf("sent: %+v", o)
	}
	if o := observe(sent, "fp2"); o.Would != digest.OutcomeQuarantined {
		t.Fatalf("differing fingerprint: %+v", o)
	}
	if r, _ := show(t, s, sent[0]); r.State != digest.StateSent {
		t.Fatalf("observe changed a receipt: %+v", r)
	}
	rep, err := s.Repeats(ctx, week, 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// The sent key was observed twice at once: a second gap under five minutes.
	want := ledger.RepeatReport{Observations: 7, Keys: 2, UnderFiveMin: 2, SameDay: 1, Later: 1, BeyondHorizon: 1}
	if rep != want {
		t.Fatalf("repeats %+v, want %+v", rep, want)
	}
}

// testNoCustomerData drives every operation with a recognisable customer id
// and then searches every stored byte for it.
func testNoCustomerData(t *testing.T, be Driver) {
	const customer = "customer_8421_zq7"
	s, clk, cfg := fresh(t, be)
	ctx := context.Background()
	id := identity(customer)
	k := keyring(t, "k2", "k1").Candidates(id)
	c := mustClaim(t, s, req(k, "fp1"))
	start1(t, s, c.Key, c.Token)
	finish1(t, s, digest.Finish{Key: c.Key, Token: c.Token, State: digest.StateHeld, Reason: "lookup inconclusive"})
	s.Release(ctx, c.Key, op)
	clk.Advance(time.Minute)
	c = mustClaim(t, s, req(k, "fp1"))
	finish1(t, s, digest.Finish{Key: c.Key, Token: c.Token, State: digest.StateSent, ProviderRef: "<msg-1@example.net>"})
	claim1(t, s, req(k, "fp2"))
	s.Observe(ctx, []digest.Observation{{Keys: k, Fingerprint: "fp1", Week: week, RunID: "observe"}})
	s.PinSnapshot(ctx, digest.SnapshotPin{Type: id.Type, Week: week, Version: id.Version}, digest.WeekPin{AsOf: clk.Now(), Zone: "UTC", KeyID: "k2"})
	const address = "customer_8421_zq7@example.com"
	suppressed := keyring(t, "k2", "k1").AddressKeys(address)
	s.Suppress(ctx, ledger.Suppression{Keys: keyring(t, "k2", "k1").CustomerKeys(customer), Subject: digest.SubjectCustomer, Reason: digest.ReasonUnsubscribe, Source: "one-click"})
	s.Suppress(ctx, ledger.Suppression{Keys: suppressed, Subject: digest.SubjectAddress, Reason: digest.ReasonHardBounce, Source: "postmark"})
	s.RecordProviderEvent(ctx, ledger.ProviderEvent{Provider: "ses", ID: "e1", Kind: ledger.EventSoftBounce, Key: c.Key,
		AddressKeys: suppressed, Occurred: clk.Now(), Detail: "4.2.2"}, ledger.EventPolicy{})
	s.Close()

	dump := dumpDatabase(t, cfg)
	if !strings.Contains(dump, string(c.Key)) || !strings.Contains(dump, string(suppressed[0])) {
		t.Fatalf("dump is missing the key or the suppression; the search proves nothing")
	}
	for _, secret := range []string{customer, id.Canonical(), address, "example.com"} {
		if strings.Contains(dump, secret) {
			t.Fatalf("the ledger stores %q", secret)
		}
	}
}

// dumpDatabase returns all stored content: every row of every table on
// PostgreSQL; the database file and its WAL on SQLite.
func dumpDatabase(t *testing.T, cfg Database) string {
	t.Helper()
	ctx := context.Background()
	if cfg.URL == "" {
		var b strings.Builder
		for _, suffix := range []string{"", "-wal"} {
			data, err := os.ReadFile(cfg.Path + suffix)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			b.Write(data)
		}
		// The checkpointed file alone, through SQL, too.
		db, err := sql.Open("sqlite", "file:"+cfg.Path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var text string
		if err := db.QueryRowContext(ctx, `SELECT group_concat(key || fingerprint || run_id || iso_week || coalesce(provider_ref, '') || coalesce(last_error, ''), ' ') FROM receipts`).Scan(&text); err != nil {
			t.Fatal(err)
		}
		return b.String() + text
	}
	conn, err := pgx.Connect(ctx, cfg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) < 4 {
		t.Fatalf("tables %v %v", tables, err)
	}
	var b strings.Builder
	for _, table := range tables {
		var text *string
		if err := conn.QueryRow(ctx, `SELECT string_agg(t::text, ' ') FROM `+pgx.Identifier{table}.Sanitize()+` t`).Scan(&text); err != nil {
			t.Fatal(err)
		}
		if text != nil {
			b.WriteString(*text)
		}
	}
	return b.String()
}
