package run

import (
	"testing"

	"github.com/weeklydigest/digest/digest"
)

// The observe-mode counters have a slot for every claim outcome: an
// outcome added after OutcomeFailed must grow numOutcomes, or its
// observations would go uncounted.
func TestNumOutcomesCoversEveryOutcome(t *testing.T) {
	t.Parallel()
	for o := digest.OutcomeClaimed; int(o) < numOutcomes; o++ {
		if o.String() == "unknown" {
			t.Errorf("outcome %d has no name, but numOutcomes is %d", o, numOutcomes)
		}
	}
	if s := digest.Outcome(numOutcomes).String(); s != "unknown" {
		t.Errorf("outcome %d is %q: numOutcomes (%d) must count it", numOutcomes, s, numOutcomes)
	}
}
