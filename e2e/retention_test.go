package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/internal/e2etest"
)

// oldestRow is one entry of "status --json"'s retention.
type oldestRow struct {
	Table      string     `json:"table"`
	Oldest     *time.Time `json:"oldest"`
	AgeSeconds *int64     `json:"age_seconds"`
	OldestWeek string     `json:"oldest_week"`
}

// retentionOf runs "status --json" of week 40, which must be complete,
// and returns its retention by table.
func retentionOf(t *testing.T, e *e2etest.Env) map[string]oldestRow {
	t.Helper()
	r := e.Run("status", "--week", "2026-W40", "--json")
	var s struct {
		Verdict   string      `json:"verdict"`
		Retention []oldestRow `json:"retention"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &s); err != nil || r.Code != 0 || s.Verdict != "complete" {
		t.Fatalf("status --json: exit %d, %v\n%s%s", r.Code, err, r.Stdout, r.Stderr)
	}
	out := map[string]oldestRow{}
	for _, row := range s.Retention {
		out[row.Table] = row
	}
	if len(out) != 4 {
		t.Fatalf("retention %+v; want receipts, observations, provider_events and soft_bounces", s.Retention)
	}
	return out
}

// Issue 35, defect 7: prune takes the provider events and soft-bounce
// counts past their horizons (90 days by default) but keeps the event of
// a receipt still in the ledger, which the events look-up reads, and the
// provider's newest; "status --json" shows the oldest row of each kept
// table before and after.
func TestPruneRetentionOfProviderEvents(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	e.Seed(10, week40)
	e.MustRun("run", "--week", "2026-W40")
	ctx := context.Background()
	var key string
	if err := e.Pool.QueryRow(ctx, `SELECT key FROM receipts WHERE state = 'sent' ORDER BY key LIMIT 1`).Scan(&key); err != nil {
		t.Fatal(err)
	}
	// As "digest serve" stores them, received 200 days ago (and one now).
	if _, err := e.Pool.Exec(ctx, `
INSERT INTO provider_events (provider, event_id, kind, key, address_key, detail, occurred_at, counted_at, received_at) VALUES
    ('postmark', 'of-a-receipt', 'delivered', $1, NULL, '', now() - interval '200 days', now() - interval '200 days', now() - interval '200 days'),
    ('postmark', 'of-an-address', 'hard_bounce', NULL, 'k1:' || repeat('ab', 32), '', now() - interval '200 days', now() - interval '200 days', now() - interval '200 days'),
    ('postmark', 'newest', 'delivered', NULL, NULL, '', now(), now(), now())`, key); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pool.Exec(ctx, `INSERT INTO soft_bounces (address_key, iso_week, bounces, last_at)
VALUES ('k1:' || repeat('ab', 32), '2026-W20', 2, now() - interval '200 days')`); err != nil {
		t.Fatal(err)
	}
	before := retentionOf(t, e)
	if r := before["receipts"]; r.OldestWeek != "2026-W40" || r.Oldest == nil || !r.Oldest.Equal(week40.Start(time.UTC)) {
		t.Fatalf("oldest receipts %+v; want 2026-W40 from its start", r)
	}
	for _, table := range []string{"provider_events", "soft_bounces"} {
		if r := before[table]; r.AgeSeconds == nil || *r.AgeSeconds < 200*86400 {
			t.Fatalf("oldest %s: %+v; want 200 days old", table, r)
		}
	}

	dry := e.MustRun("prune", "--older-than", "90d", "--dry-run")
	if !strings.Contains(dry.Stdout, "would prune 1 provider events") || !strings.Contains(dry.Stdout, "would prune 1 soft-bounce counts") {
		t.Fatalf("prune --dry-run: want 1 provider event and 1 soft-bounce count\n%s", dry.Stdout)
	}
	out := e.MustRun("prune", "--older-than", "90d")
	if !strings.Contains(out.Stdout, "pruned 0 receipts") || !strings.Contains(out.Stdout, "pruned 1 provider events") ||
		!strings.Contains(out.Stdout, "pruned 1 soft-bounce counts") {
		t.Fatalf("prune: want the address's event and the soft-bounce count, no receipt\n%s", out.Stdout)
	}
	var left []string
	rows, err := e.Pool.Query(ctx, `SELECT event_id FROM provider_events ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		left = append(left, id)
	}
	if rows.Err() != nil || strings.Join(left, ",") != "newest,of-a-receipt" {
		t.Fatalf("provider events left: %v, %v; want the receipt's and the newest", left, rows.Err())
	}
	if show := e.MustRun("events", "show", "--provider", "postmark", "--key", key); !strings.Contains(show.Stdout, "of-a-receipt") ||
		!strings.Contains(show.Stdout, ": found") {
		t.Fatalf("events show of the sent receipt: want its event, found\n%s", show.Stdout)
	}

	after := retentionOf(t, e)
	if r := after["provider_events"]; r.AgeSeconds == nil || *r.AgeSeconds < 200*86400 {
		t.Fatalf("oldest provider event after the prune: %+v; want the receipt's, kept as evidence", r)
	}
	if r := after["soft_bounces"]; r.Oldest != nil {
		t.Fatalf("oldest soft bounce after the prune: %+v; want none", r)
	}
	if text := e.MustRun("status", "--week", "2026-W40").Stdout; !strings.Contains(text, "KEPT TABLE") {
		t.Fatalf("status: no KEPT TABLE section\n%s", text)
	}
}
