package e2e

import (
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/e2etest"
)

// A demo of several weeks: "digest seed" into tables that already hold
// customers adds the next week's activity, and each week's run sends
// that week's digests.
func TestSeedSeveralWeeks(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	week41 := digest.ISOWeek{Year: 2026, Week: 41}
	want40 := e.Seed(12, week40)
	want41 := e.Seed(12, week41)
	e.Seed(12, week41) // again: adds nothing
	first := e.MustRun("run", "--week", "2026-W40")
	second := e.MustRun("run", "--week", "2026-W41")
	if first.Count(t, "sent") != len(want40) || second.Count(t, "sent") != len(want41) {
		t.Fatalf("sent %d and %d, want %d and %d", first.Count(t, "sent"), second.Count(t, "sent"), len(want40), len(want41))
	}
	checkRunLog(t, first, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8")
}
