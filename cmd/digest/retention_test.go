package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/sqlite"
)

func TestReplayHorizonSetting(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want time.Duration // 0: refused
	}{
		{"", 90 * 24 * time.Hour}, // the default
		{"90d", 90 * 24 * time.Hour},
		{"14d", 14 * 24 * time.Hour},
		{"336h", 14 * 24 * time.Hour},
		{"2160h", 90 * 24 * time.Hour},
		{"13d", 0},
		{"335h59m", 0},
		{"1h", 0},
		{"0d", 0},
		{"-30d", 0},
		{"1.5d", 0},
		{"ninety", 0},
		{"100000d", 0},
	} {
		env := &Env{Getenv: func(k string) string {
			if k == "DIGEST_REPLAY_HORIZON" {
				return c.in
			}
			return ""
		}, Stdout: io.Discard, Stderr: io.Discard}
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		st := register(fs, env, "prune")
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		got, err := st.replayHorizon()
		switch {
		case c.want == 0 && (err == nil || !isUsage(err) || !strings.Contains(err.Error(), "DIGEST_REPLAY_HORIZON")):
			t.Errorf("%q: %v, %v; want a usage error naming DIGEST_REPLAY_HORIZON", c.in, got, err)
		case c.want != 0 && (err != nil || got != c.want):
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestEventRetentionSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		vars   map[string]string
		events time.Duration // 0: refused
		counts time.Duration
	}{
		{nil, 90 * 24 * time.Hour, 90 * 24 * time.Hour}, // the defaults
		{map[string]string{"DIGEST_EVENTS_RETENTION": "14d", "DIGEST_SOFT_BOUNCE_RETENTION": "336h"}, 14 * 24 * time.Hour, 14 * 24 * time.Hour},
		{map[string]string{"DIGEST_EVENTS_RETENTION": "13d"}, 0, 0},
		{map[string]string{"DIGEST_SOFT_BOUNCE_RETENTION": "1h"}, 0, 0},
		{map[string]string{"DIGEST_EVENTS_RETENTION": "ninety"}, 0, 0},
		{map[string]string{"DIGEST_EVENTS_RETENTION": "20d", "DIGEST_EVENTS_LAG": "500h"}, 0, 0}, // shorter than the lag
		{map[string]string{"DIGEST_EVENTS_RETENTION": "21d", "DIGEST_EVENTS_LAG": "500h"}, 21 * 24 * time.Hour, 90 * 24 * time.Hour},
		{map[string]string{"DIGEST_SOFT_BOUNCE_WEEKS": "0"}, 0, 0},
	} {
		env := &Env{Getenv: func(k string) string { return c.vars[k] }, Stdout: io.Discard, Stderr: io.Discard}
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		st := register(fs, env, "prune")
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		ps, err := parsePrune(st, "90d")
		switch {
		case c.events == 0 && (err == nil || !isUsage(err) || !strings.Contains(err.Error(), "DIGEST_")):
			t.Errorf("%v: %+v, %v; want a usage error naming the setting", c.vars, ps.events, err)
		case c.events != 0 && (err != nil || ps.events.ProviderEvents != c.events || ps.events.SoftBounces != c.counts ||
			ps.events.Policy.SoftBounceWeeks != 3 || ps.events.Lag <= 0):
			t.Errorf("%v: %+v, %v; want events %v, counts %v, 3 weeks and a lag", c.vars, ps.events, err, c.events, c.counts)
		}
	}
}

// "digest prune" takes the provider events and soft-bounce counts past
// their horizons (the defaults, 90 days) and keeps the event of a receipt
// still in the ledger and the provider's newest; a dry run counts as
// much; "digest status --json" then shows the oldest row of each kept
// table.
func TestPruneTakesOldProviderEventsAndSoftBounces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	vars := map[string]string{"DIGEST_LEDGER_PATH": filepath.Join(dir, "digest.db"), "DIGEST_OUTBOX_DIR": filepath.Join(dir, "outbox"), "DIGEST_HMAC_KEYS": testKeys}
	snapshot := "../../examples/snapshot.jsonl"
	if code, _, stderr := runMain(t, vars, "run", "--snapshot", snapshot, "--week", "2026-W48"); code != ExitOK {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	now := time.Now()
	longAgo := now.Add(-100 * 24 * time.Hour).UTC().Truncate(time.Microsecond)
	store := func(clock time.Time) *sqlite.Store {
		s, err := sqlite.Open(ctx, sqlite.Config{Path: vars["DIGEST_LEDGER_PATH"], Now: func() time.Time { return clock }})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	old := store(longAgo) // what it records was received 100 days ago
	sent, err := old.WeekKeys(ctx, digest.ISOWeek{Year: 2026, Week: 48}, digest.StateSent, "", 1)
	if err != nil || len(sent) != 1 {
		t.Fatalf("a sent key: %v, %v", sent, err)
	}
	kr, err := digest.ParseKeyring(testKeys)
	if err != nil {
		t.Fatal(err)
	}
	addr := kr.AddressKeys("gone@example.com")
	for _, e := range []ledger.ProviderEvent{
		{Provider: "ses", ID: "of-a-receipt", Kind: ledger.EventDelivered, Key: sent[0], Occurred: longAgo},
		{Provider: "ses", ID: "of-an-address", Kind: ledger.EventHardBounce, AddressKeys: addr, Occurred: longAgo},
		{Provider: "ses", ID: "soft", Kind: ledger.EventSoftBounce, AddressKeys: addr, Occurred: longAgo},
	} {
		if _, err := old.RecordProviderEvent(ctx, e, ledger.EventPolicy{}); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()
	recent := store(now)
	if _, err := recent.RecordProviderEvent(ctx, ledger.ProviderEvent{Provider: "ses", ID: "newest", Kind: ledger.EventAccepted, Occurred: now}, ledger.EventPolicy{}); err != nil {
		t.Fatal(err)
	}
	recent.Close()

	for _, c := range []struct {
		args []string
		verb string
	}{{[]string{"--dry-run"}, "would prune"}, {nil, "pruned"}} {
		code, out, stderr := runMain(t, vars, append([]string{"prune", "--older-than", "90d"}, c.args...)...)
		if code != ExitOK || !strings.Contains(out, c.verb+" 2 provider events received more than 90d ago") ||
			!strings.Contains(out, c.verb+" 1 soft-bounce counts last bounced more than 90d ago") {
			t.Fatalf("prune %v: exit %d; want 2 provider events (the address's bounces) and 1 soft-bounce count\n%s%s", c.args, code, out, stderr)
		}
	}
	s := store(now)
	defer s.Close()
	if ev, err := s.EventEvidence(ctx, "ses", sent[0]); err != nil || len(ev.Events) != 1 {
		t.Fatalf("the event of the sent receipt: %+v, %v; want kept for its look-up", ev.Events, err)
	}
	if wms, err := s.Watermarks(ctx); err != nil || len(wms) != 1 || wms[0].Events != 2 {
		t.Fatalf("watermarks %+v, %v; want the receipt's event and the newest left", wms, err)
	}

	code, out, stderr := runMain(t, vars, "status", "--week", "2026-W48", "--snapshot", snapshot, "--json")
	if code != ExitOK {
		t.Fatalf("status: exit %d\n%s", code, stderr)
	}
	var st struct {
		Verdict   string         `json:"verdict"`
		Retention []retentionRow `json:"retention"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Verdict != "complete" || len(st.Retention) != 4 {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	byTable := map[string]retentionRow{}
	for _, r := range st.Retention {
		byTable[r.Table] = r
	}
	if r := byTable["receipts"]; r.OldestWeek != "2026-W48" || r.Oldest == nil {
		t.Errorf("oldest receipts %+v; want 2026-W48", r)
	}
	if r := byTable["provider_events"]; r.Oldest == nil || !r.Oldest.Equal(longAgo) || *r.AgeSeconds < 100*24*3600 {
		t.Errorf("oldest provider event %+v; want the receipt's, received %v", r, longAgo)
	}
	if r := byTable["soft_bounces"]; r.Oldest != nil || r.AgeSeconds != nil {
		t.Errorf("oldest soft bounce %+v; want none", r)
	}
	if code, out, _ := runMain(t, vars, "status", "--week", "2026-W48", "--snapshot", snapshot); code != ExitOK ||
		!regexp.MustCompile(`(?m)^provider_events +`+longAgo.Format(time.RFC3339)+` +100d$`).MatchString(out) {
		t.Errorf("status: exit %d; want the oldest provider event, 100d old\n%s", code, out)
	}
}
