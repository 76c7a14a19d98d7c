package weekstatus

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/snapshot"
)

// pagedStates is a ledger whose WeekStates takes a while per call, or,
// with hang, waits for its context: the only call ghostStates makes.
type pagedStates struct {
	ledger.Store
	delay time.Duration
	hang  bool
	calls int
}

func (p *pagedStates) WeekStates(ctx context.Context, _ digest.ISOWeek, keys []digest.Key) (map[digest.Key]digest.State, error) {
	p.calls++
	if p.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	time.Sleep(p.delay)
	out := map[digest.Key]digest.State{}
	for i, k := range keys {
		if i%2 == 0 {
			out[k] = digest.StateSent
		}
	}
	return out, nil
}

// The ghosts of a large shard are looked up a page at a time, each page
// with its own deadline: pages that take longer in all than one deadline
// still complete (a 10,000,000-customer week's shard has a hundred and
// more), and a page the ledger never answers fails at its deadline.
func TestGhostStatesBoundsEachPageNotTheWhole(t *testing.T) {
	t.Parallel()
	kr, err := digest.ParseKeyring("k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
	if err != nil {
		t.Fatal(err)
	}
	spec := digest.Spec{Week: digest.ISOWeek{Year: 2026, Week: 48}, Type: "weekly_activity", Version: "v1", Location: time.UTC}
	customers := make([]string, 40*1000)
	for i := range customers {
		customers[i] = fmt.Sprintf("c%06d", i)
	}
	const perCall = 400 * time.Millisecond
	call := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), perCall)
	}

	slow := &pagedStates{delay: 25 * time.Millisecond} // 40 pages: a second in all
	got, err := ghostStates(context.Background(), slow, spec, kr, customers, call)
	if err != nil {
		t.Fatalf("40 pages of 25 ms under a %s deadline each: %v", perCall, err)
	}
	if slow.calls != 40 || got[digest.StateSent] != 20000 {
		t.Fatalf("%d calls, %v; want 40 calls and 20000 sent", slow.calls, got)
	}

	hung := &pagedStates{hang: true}
	if _, err := ghostStates(context.Background(), hung, spec, kr, customers, call); !errors.Is(err, context.DeadlineExceeded) || hung.calls != 1 {
		t.Fatalf("a ledger that never answers: %v after %d calls; want the first call's deadline", err, hung.calls)
	}
}

// recordingLedger answers the pin and the ghosts at once and takes long
// to record, as the record's read of a large week's partition does.
type recordingLedger struct {
	pagedStates
	pin      digest.WeekPin
	record   time.Duration
	recorded []ledger.Expectation
}

func (l *recordingLedger) Pinned(context.Context, digest.SnapshotPin) (digest.WeekPin, bool, error) {
	return l.pin, true, nil
}

func (l *recordingLedger) RecordExpectation(ctx context.Context, _ digest.SnapshotPin, e ledger.Expectation) error {
	select {
	case <-time.After(l.record):
	case <-ctx.Done():
		return ctx.Err()
	}
	l.recorded = append(l.recorded, e)
	return nil
}

// The record, which reads the week's partition, is bounded by the
// caller's context only, not by the per-call bound of the look-ups: a
// shard of a 10,000,000-customer week took longer than it, and status
// then read the whole week.
func TestRecordExpectationBoundsTheLookupsNotTheRecord(t *testing.T) {
	t.Parallel()
	kr, err := digest.ParseKeyring("k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
	if err != nil {
		t.Fatal(err)
	}
	week := digest.ISOWeek{Year: 2026, Week: 48}
	spec := digest.Spec{Week: week, Type: "weekly_activity", Version: "v1", Location: time.UTC}
	asOf := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	src, rd := NewReader(newSyntheticSource(40, week), spec, false)
	for _, err := range src.Records(context.Background(), digest.SourceQuery{Week: week, Location: time.UTC, AsOf: asOf}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	const perCall = 100 * time.Millisecond
	l := &recordingLedger{pin: digest.WeekPin{AsOf: asOf, Zone: "UTC", KeyID: "k1"}, record: 3 * perCall}
	if err := RecordExpectation(context.Background(), l, rd, kr, spec, false, "r1", time.Now(), perCall); err != nil {
		t.Fatalf("a record taking three times the look-ups' bound: %v", err)
	}
	if len(l.recorded) != 1 || l.recorded[0].Send+l.recorded[0].Suppressed+l.recorded[0].Empty != 40 {
		t.Fatalf("recorded %+v; want one expectation of the 40 customers read", l.recorded)
	}

	ctx, cancel := context.WithTimeout(context.Background(), perCall)
	defer cancel()
	l.recorded = nil
	if err := RecordExpectation(ctx, l, rd, kr, spec, false, "r1", time.Now(), perCall); !errors.Is(err, context.DeadlineExceeded) || len(l.recorded) != 0 {
		t.Fatalf("the caller's deadline passed during the record: %v, %d recorded; want its deadline", err, len(l.recorded))
	}
}

// syntheticSource is a source of n synthetic customers of week.
type syntheticSource struct {
	records []digest.Record
}

func newSyntheticSource(n int, week digest.ISOWeek) *syntheticSource {
	s := &syntheticSource{}
	for r := range snapshot.Synthetic(n, week, 1) {
		s.records = append(s.records, r)
	}
	return s
}

func (s *syntheticSource) Records(_ context.Context, q digest.SourceQuery) iter.Seq2[digest.Record, error] {
	return func(yield func(digest.Record, error) bool) {
		for _, r := range s.records {
			if q.Wants(r.Customer.ID) && !yield(r, nil) {
				return
			}
		}
	}
}
