package verify_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/verify"
)

var week = digest.ISOWeek{Year: 2026, Week: 40}

func key(i int) digest.Key { return digest.Key(fmt.Sprintf("k1:%064x", i)) }

// memLedger is the week's receipts, for the pure logic of a verification
// (the stores' WeekKeys and WeekStates are tested by ledgertest).
type memLedger struct {
	states   map[digest.Key]digest.State
	mu       sync.Mutex
	reads    int
	maxLimit int
}

func (l *memLedger) WeekKeys(_ context.Context, w digest.ISOWeek, st digest.State, after digest.Key, limit int) ([]digest.Key, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads++
	l.maxLimit = max(l.maxLimit, limit)
	var out []digest.Key
	for _, k := range slices.Sorted(maps.Keys(l.states)) {
		if w == week && l.states[k] == st && k > after && len(out) < limit {
			out = append(out, k)
		}
	}
	return out, nil
}

func (l *memLedger) WeekStates(_ context.Context, w digest.ISOWeek, keys []digest.Key) (map[digest.Key]digest.State, error) {
	out := map[digest.Key]digest.State{}
	for _, k := range keys {
		if st, ok := l.states[k]; ok && w == week {
			out[k] = st
		}
	}
	return out, nil
}

// provider answers Count from counts; fail, when set, may fail a call.
type provider struct {
	mu     sync.Mutex
	counts map[digest.Key]int
	listed []digest.Key
	calls  map[digest.Key]int
	fail   func(k digest.Key, call int) error
}

func (p *provider) Count(_ context.Context, k digest.Key) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calls == nil {
		p.calls = map[digest.Key]int{}
	}
	p.calls[k]++
	if p.fail != nil {
		if err := p.fail(k, p.calls[k]); err != nil {
			return 0, err
		}
	}
	return p.counts[k], nil
}

func (p *provider) ListKeys(_ context.Context, fn func([]digest.Key) error) error {
	for c := range slices.Chunk(p.listed, 2) {
		if err := fn(slices.Clone(c)); err != nil {
			return err
		}
	}
	return nil
}

// countingLimiter counts the tokens taken.
type countingLimiter struct{ waits atomic.Int64 }

func (l *countingLimiter) Wait(context.Context) error { l.waits.Add(1); return nil }

// sentOnce returns a week of n sent receipts, each found once.
func sentOnce(n int) (*memLedger, *provider) {
	l := &memLedger{states: map[digest.Key]digest.State{}}
	p := &provider{counts: map[digest.Key]int{}}
	for i := range n {
		l.states[key(i)] = digest.StateSent
		p.counts[key(i)] = 1
	}
	return l, p
}

func mustRun(t *testing.T, cfg verify.Config) *verify.Report {
	t.Helper()
	v, err := verify.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := v.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// Each sent receipt is found once, not found, or found more than once;
// a listed message whose key is a receipt of the week in another state is
// unrecorded, one of a sent receipt or of no receipt of the week is not; a
// key the provider refuses to answer about is an error, not a mismatch.
func TestVerifyClassifies(t *testing.T) {
	t.Parallel()
	l := &memLedger{states: map[digest.Key]digest.State{
		key(1): digest.StateSent, key(2): digest.StateSent, key(3): digest.StateSent, key(4): digest.StateSent,
		key(5): digest.StateFailed, key(6): digest.StateHeld, key(7): digest.StateRetryable,
	}}
	refused := &digest.SendError{Class: digest.SendPermanent, Err: errors.New("HTTP 401")}
	p := &provider{
		counts: map[digest.Key]int{key(1): 1, key(2): 0, key(3): 3},
		listed: []digest.Key{key(1), key(3), key(3), key(3), key(5), key(5), key(6), key(99)},
		fail: func(k digest.Key, _ int) error {
			if k == key(4) {
				return refused
			}
			return nil
		},
	}
	rep := mustRun(t, verify.Config{Week: week, Ledger: l, Provider: p, Lister: p, Name: "test"})
	want := verify.Report{
		Week: "2026-W40", Provider: "test", Sent: 4, Checked: 3, FoundOnce: 1,
		NotFound:          []digest.Key{key(2)},
		Duplicated:        []verify.Duplicate{{Key: key(3), Count: 3}},
		UnrecordedChecked: true, Listed: 8,
		Unrecorded: []verify.Unrecorded{{Key: key(5), State: digest.StateFailed}, {Key: key(6), State: digest.StateHeld}},
		Errors:     1,
	}
	if rep.Sent != want.Sent || rep.Checked != want.Checked || rep.FoundOnce != want.FoundOnce ||
		!slices.Equal(rep.NotFound, want.NotFound) || !slices.Equal(rep.Duplicated, want.Duplicated) ||
		!slices.Equal(rep.Unrecorded, want.Unrecorded) || rep.Errors != want.Errors || rep.Listed != want.Listed ||
		!rep.UnrecordedChecked || rep.Week != want.Week || rep.Provider != want.Provider {
		t.Fatalf("report %+v\nwant   %+v", *rep, want)
	}
	if rep.Mismatches() != 4 || len(rep.ErrorExamples) != 1 || rep.ErrorExamples[0].Key != key(4) {
		t.Fatalf("mismatches %d, error examples %+v", rep.Mismatches(), rep.ErrorExamples)
	}
	if p.calls[key(4)] != 1 {
		t.Errorf("a permanent failure was asked %d times, want once", p.calls[key(4)])
	}
	if rep.ProviderCalls != 4+4 { // four counts, four listing pages
		t.Errorf("provider calls %d, want 8", rep.ProviderCalls)
	}
}

// CountByListing finds the same from one pass over the provider's
// listing, asking Count about nothing: counts by key, a listed key of
// another case of key id (a Mailpit tag's) matched to the week's.
func TestVerifyCountByListing(t *testing.T) {
	t.Parallel()
	upper := digest.Key("K9:" + string(key(8))[3:])
	l := &memLedger{states: map[digest.Key]digest.State{
		key(1): digest.StateSent, key(2): digest.StateSent, key(3): digest.StateSent, upper: digest.StateSent,
		key(5): digest.StateFailed,
	}}
	lower := digest.Key("k9:" + string(key(8))[3:])
	p := &provider{
		listed: []digest.Key{key(1), key(3), key(3), lower, key(5), key(99)},
		fail:   func(digest.Key, int) error { return errors.New("Count must not be called") },
	}
	for _, sample := range []int{0, 10} {
		lim := &countingLimiter{}
		rep := mustRun(t, verify.Config{Week: week, Ledger: l, Provider: p, Lister: p, CountByListing: true, Sample: sample, Limiter: lim})
		if rep.Sent != 4 || rep.Checked != 4 || rep.FoundOnce != 2 || rep.Errors != 0 ||
			!slices.Equal(rep.NotFound, []digest.Key{key(2)}) ||
			!slices.Equal(rep.Duplicated, []verify.Duplicate{{Key: key(3), Count: 2}}) ||
			!slices.Equal(rep.Unrecorded, []verify.Unrecorded{{Key: key(5), State: digest.StateFailed}}) {
			t.Fatalf("sample %d: report %+v", sample, *rep)
		}
		if rep.ProviderCalls != 3 || lim.waits.Load() != 3 { // three listing pages, each paced
			t.Errorf("provider calls %d, limiter tokens %d; want 3", rep.ProviderCalls, lim.waits.Load())
		}
	}
	if len(p.calls) != 0 {
		t.Fatalf("Count called: %v", p.calls)
	}
}

// Without a lister nothing is said about unrecorded messages.
func TestVerifyWithoutListerDoesNotCheckUnrecorded(t *testing.T) {
	t.Parallel()
	l := &memLedger{states: map[digest.Key]digest.State{key(1): digest.StateSent, key(5): digest.StateFailed}}
	p := &provider{counts: map[digest.Key]int{key(1): 1, key(5): 1}, listed: []digest.Key{key(5)}}
	rep := mustRun(t, verify.Config{Week: week, Ledger: l, Provider: p})
	if rep.UnrecordedChecked || len(rep.Unrecorded) != 0 || rep.Mismatches() != 0 || rep.FoundOnce != 1 {
		t.Fatalf("report %+v", *rep)
	}
}

// The week's sent keys come from the ledger in pages of PageSize, and each
// is asked about exactly once.
func TestVerifyStreamsThePagesOnce(t *testing.T) {
	t.Parallel()
	l, p := sentOnce(2500)
	lim := &countingLimiter{}
	rep := mustRun(t, verify.Config{Week: week, Ledger: l, Provider: p, PageSize: 1000, Concurrency: 8, Limiter: lim})
	if rep.Checked != 2500 || rep.FoundOnce != 2500 || rep.Sent != 2500 {
		t.Fatalf("report %+v", *rep)
	}
	if lim.waits.Load() != 2500 || rep.ProviderCalls != 2500 {
		t.Errorf("%d limiter tokens for %d provider calls, want one per call, 2500", lim.waits.Load(), rep.ProviderCalls)
	}
	if l.reads != 3 || l.maxLimit != 1000 {
		t.Errorf("ledger read %d times, largest page %d; want 3 pages of at most 1000", l.reads, l.maxLimit)
	}
	for k, n := range p.calls {
		if n != 1 {
			t.Fatalf("%s asked %d times", k, n)
		}
	}
}

// A sample checks Sample distinct sent keys, each as likely as any other:
// over many draws of 10 of 50 each key is picked about 10/50 of the time.
func TestVerifySampleIsUniform(t *testing.T) {
	t.Parallel()
	l, p := sentOnce(50)
	const draws = 2000
	picks := map[digest.Key]int{}
	for d := range draws {
		p.calls = nil
		rep := mustRun(t, verify.Config{Week: week, Ledger: l, Provider: p, Sample: 10, PageSize: 7, Rand: rand.New(rand.NewPCG(uint64(d), 1))})
		if rep.Checked != 10 || rep.Sent != 50 || len(p.calls) != 10 {
			t.Fatalf("draw %d: checked %d of %d, %d distinct keys asked; want 10 of 50", d, rep.Checked, rep.Sent, len(p.calls))
		}
		for k := range p.calls {
			picks[k]++
		}
	}
	for i := range 50 { // expected 400 each; 250..550 is over 7 standard deviations
		if n := picks[key(i)]; n < 250 || n > 550 {
			t.Errorf("key %d picked %d times in %d draws, want about 400", i, n, draws)
		}
	}
}

// A temporary failure is asked again (after the server's Retry-After when
// it gives one), up to Attempts; a key that never answers is an error.
func TestVerifyRetriesTemporaryFailures(t *testing.T) {
	t.Parallel()
	l := &memLedger{states: map[digest.Key]digest.State{key(1): digest.StateSent, key(2): digest.StateSent}}
	now := time.Now()
	p := &provider{counts: map[digest.Key]int{key(1): 1, key(2): 1}, fail: func(k digest.Key, call int) error {
		if k == key(2) || call < 3 {
			return &digest.SendError{Class: digest.SendTemporary, RetryAt: now, Err: errors.New("HTTP 429")}
		}
		return nil
	}}
	rep := mustRun(t, verify.Config{Week: week, Ledger: l, Provider: p, Attempts: 3, Backoff: func(int) time.Duration { return time.Millisecond }})
	if rep.FoundOnce != 1 || rep.Errors != 1 || rep.ErrorExamples[0].Key != key(2) || p.calls[key(1)] != 3 || p.calls[key(2)] != 3 {
		t.Fatalf("report %+v, calls %v", *rep, p.calls)
	}
}

// failingLister cannot list.
type failingLister struct{}

func (failingLister) ListKeys(context.Context, func([]digest.Key) error) error {
	return &digest.SendError{Class: digest.SendTemporary, Err: errors.New("HTTP 503")}
}

// When the counts come from a listing that fails, nothing is checked and
// the failure is an error: no key is called missing.
func TestVerifyCountByListingWhenTheListingFails(t *testing.T) {
	t.Parallel()
	l, p := sentOnce(5)
	rep := mustRun(t, verify.Config{Week: week, Ledger: l, Provider: p, Lister: failingLister{}, CountByListing: true})
	if rep.Errors != 1 || rep.Checked != 0 || len(rep.NotFound) != 0 || rep.Mismatches() != 0 || rep.Sent != 5 {
		t.Fatalf("report %+v; want one error and nothing checked", *rep)
	}
}
