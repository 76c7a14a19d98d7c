package weekstatus_test

import (
	"bufio"
	"context"
	"errors"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/snapshot"
)

func writeFile(path string, records []digest.Record) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if _, err := snapshot.WriteJSONL(w, slices.Values(records)); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// asOfSource keeps the activity recorded by q.AsOf, as the PostgreSQL
// source does (a snapshot file is fixed and ignores it).
type asOfSource struct{ digest.Source }

func (s asOfSource) Records(ctx context.Context, q digest.SourceQuery) iter.Seq2[digest.Record, error] {
	return func(yield func(digest.Record, error) bool) {
		for r, err := range s.Source.Records(ctx, q) {
			if err == nil {
				r.Activity = slices.DeleteFunc(slices.Clone(r.Activity), func(a digest.Activity) bool { return a.RecordedAt.After(q.AsOf) })
			}
			if !yield(r, err) {
				return
			}
		}
	}
}

// pagedLookup is a week's receipts and observed keys in maps, standing in
// for the ledger in tests of Count's arithmetic; it records the largest
// page of keys it was asked for.
type pagedLookup struct {
	states   map[digest.Key]digest.State
	observed map[digest.Key]bool
	calls    int
	maxKeys  int
	failAt   int // the call of WeekStates that fails with fail (1-based; 0: none)
	fail     error
	// asked are the keys ObservedKeys was asked about, in observedCalls calls.
	asked         map[digest.Key]bool
	observedCalls int
}

func (l *pagedLookup) WeekStates(_ context.Context, _ digest.ISOWeek, keys []digest.Key) (map[digest.Key]digest.State, error) {
	l.calls++
	if l.calls == l.failAt {
		return nil, l.fail
	}
	l.maxKeys = max(l.maxKeys, len(keys))
	out := map[digest.Key]digest.State{}
	for _, k := range keys {
		if s, ok := l.states[k]; ok {
			out[k] = s
		}
	}
	return out, nil
}

func (l *pagedLookup) ObservedKeys(_ context.Context, _ digest.ISOWeek, keys []digest.Key) (map[digest.Key]bool, error) {
	l.maxKeys = max(l.maxKeys, len(keys))
	l.observedCalls++
	if l.asked == nil {
		l.asked = map[digest.Key]bool{}
	}
	for _, k := range keys {
		l.asked[k] = true
	}
	out := map[digest.Key]bool{}
	for _, k := range keys {
		if l.observed[k] {
			out[k] = true
		}
	}
	return out, nil
}

// twoReads is a source of records whose read as of a cutoff keeps the
// activity recorded by then, as asOfSource's. A customer in bad[asOf] is
// a bad record in the read as of that cutoff; reversed[asOf] yields that
// read in reverse order. It records how far the latest read ran ahead of
// the earlier one: the most records it had yielded beyond them. The two
// reads may run in goroutines of their own.
type twoReads struct {
	mu       sync.Mutex
	records  []digest.Record
	bad      map[time.Time]map[string]bool
	reversed map[time.Time]bool
	yielded  map[time.Time]int
	earlier  time.Time
	latest   time.Time
	ahead    int
}

func (s *twoReads) Records(_ context.Context, q digest.SourceQuery) iter.Seq2[digest.Record, error] {
	return func(yield func(digest.Record, error) bool) {
		recs := slices.Clone(s.records)
		if s.reversed[q.AsOf] {
			slices.Reverse(recs)
		}
		for _, r := range recs {
			s.mu.Lock()
			s.yielded[q.AsOf]++
			if q.AsOf.Equal(s.latest) {
				s.ahead = max(s.ahead, s.yielded[s.latest]-s.yielded[s.earlier])
			}
			s.mu.Unlock()
			var err error
			if s.bad[q.AsOf][r.Customer.ID] {
				err = &digest.BadRecordError{Where: r.Customer.ID, Err: errors.New("bad")}
				r = digest.Record{}
			} else {
				r.Activity = slices.DeleteFunc(slices.Clone(r.Activity), func(a digest.Activity) bool { return a.RecordedAt.After(q.AsOf) })
			}
			if !yield(r, err) {
				return
			}
		}
	}
}

// syntheticFile writes n synthetic customers of week to a snapshot file
// and opens it, returning the records too.
func syntheticFile(t *testing.T, n int, week digest.ISOWeek) ([]digest.Record, *snapshot.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.jsonl")
	var records []digest.Record
	for r := range snapshot.Synthetic(n, week, 1) {
		records = append(records, r)
	}
	if err := writeFile(path, records); err != nil {
		t.Fatal(err)
	}
	src, err := snapshot.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return records, src
}
