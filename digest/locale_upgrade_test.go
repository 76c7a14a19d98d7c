package digest_test

import (
	"testing"
)

// TestCanonicalUnchangedByLocalisation pins the canonical form and the
// fingerprint of a digest as they were before digests were localised. The
// customer's locale was already part of the canonical form (and so of the
// fingerprint), so localising the rendering needs no change to it: a rerun
// of a week sent before the upgrade finds every receipt as a duplicate,
// never a fingerprint mismatch (which would quarantine the whole week).
// If this test fails, the canonical form changed: read docs/operations.md,
// "Upgrading across a change of the canonical form", before updating it.
func TestCanonicalUnchangedByLocalisation(t *testing.T) {
	t.Parallel()
	d := mustBuild(t, testRecord(t), testSpec(t))
	const wantPrefix = `{"format":"digest-canonical-1","type":"weekly_activity","version":"v3","week":"2026-W48",` +
		`"from":"2026-11-23T00:00:00Z","to":"2026-11-30T00:00:00Z",` +
		`"customer":{"id":"customer_8421","email":"zoe@example.com","name":"Zoë","locale":"de-DE"},`
	got := string(d.Canonical())
	if len(got) < len(wantPrefix) || got[:len(wantPrefix)] != wantPrefix {
		t.Errorf("canonical form changed:\n got %s\nwant %s...", got, wantPrefix)
	}
	const wantFP = "sha256:f4b3b19b4d84de96f14b0a865ecd313d2825a144bb15c5ed61143471ce258713" // computed at 90c2fd0, before localisation
	if fp := d.Fingerprint(); fp != wantFP {
		t.Errorf("Fingerprint = %s, want %s (as before localisation)", fp, wantFP)
	}
}
