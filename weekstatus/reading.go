package weekstatus

import (
	"context"
	"errors"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/run"
)

// Reading is what one complete read of a shard of the source found,
// classified as Count classifies it: the digests a run would send, and the
// customers suppressed, empty or not built, with the ids of the suppressed
// and empty ones (their receipts, if any, are not the week's Send
// digests': see ledger.Expectation's Ghosts).
type Reading struct {
	AsOf     time.Time
	Zone     string
	Shard    digest.Shard
	Send     int64
	Suppress int64
	Empty    int64
	NotBuilt int64
	// Others are the ids of the suppressed and empty customers.
	Others []string

	// listed are the customers the run found on the suppression list
	// (Reader.Listed), written under the Reader's lock, never by add.
	listed map[string]bool
}

// add classifies one record of the stream as Count does.
func (r *Reading) add(rec digest.Record, err error, spec digest.Spec, sendEmpty bool) {
	var bad *digest.BadRecordError
	if errors.As(err, &bad) {
		r.NotBuilt++
		return
	}
	_, v, _ := run.VerdictOf(rec, spec, r.Shard, sendEmpty)
	switch v {
	case run.VerdictSuppressed:
		r.Suppress++
		r.Others = append(r.Others, rec.Customer.ID)
	case run.VerdictInvalid:
		r.NotBuilt++
	case run.VerdictEmpty:
		r.Empty++
		r.Others = append(r.Others, rec.Customer.ID)
	case run.VerdictSend:
		r.Send++
	}
}

// Reader wraps a run's source and keeps what the last complete read of a
// whole shard found (a read the run consumed to its end without an error
// other than bad records; a retry pass's read of listed customers is not
// one): the run records it as the week's expectation after it ends.
type Reader struct {
	digest.Source
	Spec      digest.Spec // type and version; the zone comes from each query
	SendEmpty bool

	mu   sync.Mutex
	cur  *Reading // the read of a whole shard under way, or the last one
	last *Reading // the last complete read
}

// Last returns the last complete read, or false when there was none, with
// the customers Listed named counted as suppressed.
func (r *Reader) Last() (Reading, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		return Reading{}, false
	}
	rd := *r.last
	rd.Others, rd.listed = slices.Clone(rd.Others), nil
	for id := range r.last.listed {
		rd.Send--
		rd.Suppress++
		rd.Others = append(rd.Others, id)
	}
	return rd, true
}

// Listed tells the reader that the run found customer id on the ledger's
// suppression list (run.Runner's Listed hook) after the read classified
// it as a digest to send: it counts as suppressed, like a customer the
// source marks unsubscribed, in the read under way or the last one. The
// source cannot tell the suppression list, so without this the week's
// expectation would wait for a digest no run will ever send. The read
// itself takes no lock: Last applies what Listed recorded.
func (r *Reader) Listed(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil {
		return
	}
	if r.cur.listed == nil {
		r.cur.listed = map[string]bool{}
	}
	r.cur.listed[id] = true
}

// Records streams q from the wrapped source, tallying a read of a whole
// shard.
func (r *Reader) Records(ctx context.Context, q digest.SourceQuery) iter.Seq2[digest.Record, error] {
	inner := r.Source.Records(ctx, q)
	if q.Customers != nil || q.AsOf.IsZero() {
		return inner
	}
	spec := r.Spec
	spec.Week, spec.Location = q.Week, q.Location
	if spec.Location == nil {
		spec.Location = time.UTC
	}
	return func(yield func(digest.Record, error) bool) {
		rd := &Reading{AsOf: q.AsOf, Zone: spec.Location.String(), Shard: q.Shard}
		r.mu.Lock()
		r.cur = rd
		r.mu.Unlock()
		for rec, err := range inner {
			var bad *digest.BadRecordError
			if err != nil && !errors.As(err, &bad) {
				yield(rec, err)
				return // a failed read: not complete
			}
			rd.add(rec, err, spec, r.SendEmpty)
			if !yield(rec, err) {
				return // the run stopped reading: not complete
			}
		}
		if ctx.Err() != nil {
			return
		}
		r.mu.Lock()
		r.last = rd
		r.mu.Unlock()
	}
}

// checkingReader is a Reader over a source that can check the whole
// snapshot up front (digest.Checker).
type checkingReader struct {
	*Reader
	digest.Checker
}

// NewReader returns the source a run reads through, and the Reader that
// keeps its last complete read. The source still checks up front when
// src does.
func NewReader(src digest.Source, spec digest.Spec, sendEmpty bool) (digest.Source, *Reader) {
	r := &Reader{Source: src, Spec: spec, SendEmpty: sendEmpty}
	if ch, ok := src.(digest.Checker); ok {
		return checkingReader{Reader: r, Checker: ch}, r
	}
	return r, r
}
