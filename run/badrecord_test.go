package run_test

import (
	"context"
	"errors"
	"iter"
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/run"
)

// uncheckedSource is a source that cannot check its snapshot up front (as
// the PostgreSQL relations) and yields one bad record in the middle.
type uncheckedSource struct{ inner digest.Source }

func (s uncheckedSource) Records(ctx context.Context, q digest.SourceQuery) iter.Seq2[digest.Record, error] {
	return func(yield func(digest.Record, error) bool) {
		n := 0
		for rec, err := range s.inner.Records(ctx, q) {
			if n++; n == 3 {
				if !yield(digest.Record{}, &digest.BadRecordError{Where: "digest_activity customer_id=x", Field: "currency", Err: errors.New(`"XZZ" is not an ISO 4217 code`)}) {
					return
				}
			}
			if !yield(rec, err) {
				return
			}
		}
	}
}

// A bad record from a source without Check is not silently skipped in
// strict mode: it counts as invalid, so the run reports a failure (and
// the customer is not left without a digest under exit 0). In lenient
// mode it is skipped, as the operator asked.
func TestBadRecordFromUncheckedSourceIsInvalidUnlessLenient(t *testing.T) {
	t.Parallel()
	for _, lenient := range []bool{false, true} {
		f := newFixture(t, 20)
		r := f.runner(newProvider(), nil, func(c *run.Config) { c.Lenient = lenient })
		r.Source = uncheckedSource{inner: f.src}
		sum := f.run(r)
		switch {
		case !lenient && (sum.Invalid != 1 || sum.Complete()):
			t.Fatalf("strict: %+v; want 1 invalid and an incomplete run", sum)
		case lenient && (sum.Invalid != 0 || !sum.Complete()):
			t.Fatalf("lenient: %+v; want the bad record skipped and the run complete", sum)
		}
		if sum.Sent != f.want {
			t.Fatalf("lenient=%v: sent %d, want the %d good ones", lenient, sum.Sent, f.want)
		}
		if sum.Digests != 21 || sum.Unaccounted() != 0 {
			t.Fatalf("lenient=%v: %d digests, %d unaccounted; want the 21 records read, the bad one accounted for", lenient, sum.Digests, sum.Unaccounted())
		}
	}
}
