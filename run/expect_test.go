package run_test

import (
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/run"
)

// Classify is the read stage's filter, in its order: shard, suppression,
// a digest that cannot be built, an empty digest.
func TestClassify(t *testing.T) {
	t.Parallel()
	spec := digest.Spec{Week: digest.ISOWeek{Year: 2026, Week: 48}, Location: time.UTC, Type: "weekly_activity", Version: "v3"}
	in := digest.Activity{OccurredAt: spec.Week.Start(time.UTC).Add(time.Hour), AmountMinor: 100, Currency: "EUR"}
	active := digest.Record{Customer: digest.Customer{ID: "c1", Email: "c1@example.com"}, Activity: []digest.Activity{in}}
	quiet := digest.Record{Customer: digest.Customer{ID: "c2", Email: "c2@example.com"}}
	suppressed := active
	suppressed.Customer.Suppressed = true
	noID := active
	noID.Customer.ID = ""
	var other digest.Shard
	for i := range 2 {
		if s := (digest.Shard{Index: i, Count: 2}); !s.Has("c1") {
			other = s
		}
	}
	for _, tc := range []struct {
		name      string
		rec       digest.Record
		shard     digest.Shard
		sendEmpty bool
		want      run.Verdict
	}{
		{"active", active, digest.Shard{}, false, run.VerdictSend},
		{"other shard", active, other, false, run.VerdictOtherShard},
		{"suppressed", suppressed, digest.Shard{}, false, run.VerdictSuppressed},
		{"no id", noID, digest.Shard{}, false, run.VerdictInvalid},
		{"empty", quiet, digest.Shard{}, false, run.VerdictEmpty},
		{"empty, sent", quiet, digest.Shard{}, true, run.VerdictSend},
	} {
		d, v, err := run.VerdictOf(tc.rec, spec, tc.shard, tc.sendEmpty)
		if v != tc.want || (v == run.VerdictInvalid) != (err != nil) || (v == run.VerdictSend || v == run.VerdictEmpty) != (d.Identity.Customer != "") {
			t.Errorf("%s: %v, %v, %q; want verdict %v", tc.name, v, err, d.Identity.Customer, tc.want)
		}
	}
}
