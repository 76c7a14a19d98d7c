package ledgertest

import (
	"context"
	"maps"
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// versionReq is a claim of customer's digest under version (type
// weekly_activity), carrying its type and version as the run does.
func versionReq(t testing.TB, customer, version string) digest.ClaimRequest {
	t.Helper()
	id := identity(customer)
	id.Version = version
	r := req(keyring(t, "k1").Candidates(id), "fp-"+version)
	r.Type, r.Version = id.Type, version
	return r
}

// SentByVersion counts a week's sent and in-flight receipts of a type
// by the content version each stored, "" for one claimed without it (an
// older binary's): of no other week or type, and no failed one.
func testSentByVersion(t *testing.T, be Driver) {
	s, _, _ := fresh(t, be)
	ctx := context.Background()
	sendReq := func(r digest.ClaimRequest) {
		t.Helper()
		c := mustClaim(t, s, r)
		if err := finish1(t, s, digest.Finish{Key: c.Key, Token: c.Token, State: digest.StateSent, ProviderRef: "<x>"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []string{"c1", "c2", "c3"} {
		sendReq(versionReq(t, c, "v1"))
	}
	sendReq(versionReq(t, "c1", "v2"))
	// v2, c2: maybe sent (the send started, the run crashed).
	c := mustClaim(t, s, versionReq(t, "c2", "v2"))
	if err := start1(t, s, c.Key, c.Token); err != nil {
		t.Fatal(err)
	}
	// v2, c3: claimed, not started: in flight, counted (a run of v2 is
	// under way). v2, c7: failed for good: not counted.
	mustClaim(t, s, versionReq(t, "c3", "v2"))
	f := mustClaim(t, s, versionReq(t, "c7", "v2"))
	if err := finish1(t, s, digest.Finish{Key: f.Key, Token: f.Token, State: digest.StateFailed, Reason: "bounced"}); err != nil {
		t.Fatal(err)
	}
	// v1 under another type, and v1 of another week: not counted.
	other := versionReq(t, "c4", "v1")
	id := identity("c4")
	id.Type, id.Version = "monthly", "v1"
	other.Keys, other.Type = keyring(t, "k1").Candidates(id), "monthly"
	sendReq(other)
	later := versionReq(t, "c5", "v1")
	later.Week = digest.ISOWeek{Year: week.Year, Week: week.Week + 1}
	id = identity("c5")
	id.Week, id.Version = later.Week, "v1"
	later.Keys = keyring(t, "k1").Candidates(id)
	sendReq(later)
	// A receipt of an older binary: no type, no version.
	send(t, s, keys(t, "c6"), "<6@x>")

	got, err := s.SentByVersion(ctx, week, "weekly_activity")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"v1": 3, "v2": 3, "": 1}; !maps.Equal(got, want) {
		t.Fatalf("sent by version %v, want %v", got, want)
	}
	// Show and List say each receipt's type and version ("" unknown).
	if r, _ := show(t, s, versionReq(t, "c1", "v2").Keys[0]); r.Type != "weekly_activity" || r.Version != "v2" {
		t.Fatalf("show: type %q version %q, want weekly_activity v2", r.Type, r.Version)
	}
	if r, _ := show(t, s, keys(t, "c6")[0]); r.Type != "" || r.Version != "" {
		t.Fatalf("show of an older binary's receipt: type %q version %q, want none", r.Type, r.Version)
	}
	list, err := s.List(ctx, ledger.ListFilter{Week: week, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	byVersion := map[string]int{}
	for _, r := range list {
		byVersion[r.Version]++
	}
	if want := map[string]int{"v1": 4, "v2": 4, "": 1}; !maps.Equal(byVersion, want) { // c4: monthly v1
		t.Fatalf("list by version %v, want %v", byVersion, want)
	}
	none, err := s.SentByVersion(ctx, digest.ISOWeek{Year: week.Year, Week: week.Week + 2}, "weekly_activity")
	if err != nil || len(none) != 0 {
		t.Fatalf("a week without receipts: %v %v", none, err)
	}
}

// A receipt of an older binary claimed again by a run that knows its
// version (its key is of that version) takes the version on.
func testClaimAgainAdoptsVersion(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	r := req(keys(t, "c1"), "fp1") // no type or version
	c := mustClaim(t, s, r)
	if err := start1(t, s, c.Key, c.Token); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * r.Lease) // the run crashed mid-send: a later run takes it over
	r.Type, r.Version = "weekly_activity", "v3"
	mustClaim(t, s, r)
	got, err := s.SentByVersion(ctx, week, "weekly_activity")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"v3": 1}; !maps.Equal(got, want) {
		t.Fatalf("sent by version %v, want %v", got, want)
	}
}

// The pin records a deliberate resend under a new version once: the
// first detail stands, a later run's proposal does not replace it, and a
// pin made without one takes the first one proposed.
func testPinRecordsResendAsNewVersion(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	pin := digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v2"}
	plain := digest.WeekPin{AsOf: clk.Now(), Zone: "UTC", KeyID: "k1"}
	wp, err := s.PinSnapshot(ctx, pin, plain)
	if err != nil || wp.ResentAsNewVersion != "" {
		t.Fatalf("a plain pin: %q %v", wp.ResentAsNewVersion, err)
	}
	first := plain
	first.ResentAsNewVersion = `resent as new version by "ana": fixed totals; v1: 3 sent`
	if wp, err = s.PinSnapshot(ctx, pin, first); err != nil || wp.ResentAsNewVersion != first.ResentAsNewVersion {
		t.Fatalf("first resend: %q %v", wp.ResentAsNewVersion, err)
	}
	second := plain
	second.ResentAsNewVersion = `resent as new version by "bo": again`
	if wp, err = s.PinSnapshot(ctx, pin, second); err != nil || wp.ResentAsNewVersion != first.ResentAsNewVersion {
		t.Fatalf("second resend: %q %v, want the first kept", wp.ResentAsNewVersion, err)
	}
	if wp, err = s.PinSnapshot(ctx, pin, plain); err != nil || wp.ResentAsNewVersion != first.ResentAsNewVersion {
		t.Fatalf("a later plain run: %q %v, want the first kept", wp.ResentAsNewVersion, err)
	}
	got, ok, err := s.Pinned(ctx, pin)
	if err != nil || !ok || got.ResentAsNewVersion != first.ResentAsNewVersion {
		t.Fatalf("pinned: %+v %v %v", got, ok, err)
	}
}
