package run_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/sqlite"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/snapshot"
)

// The runner is tested against the real SQLite ledger and a real snapshot
// file; only the provider is scripted, so that every failure class can be
// produced on demand.

var runWeek = digest.ISOWeek{Year: 2026, Week: 40}

// clock is a test clock; Sleep advances it instead of waiting.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	c.Advance(d)
	return ctx.Err()
}

// provider is a scripted mail provider: script decides each send's result;
// accepted messages are kept by key and answer look-ups.
type provider struct {
	mu       sync.Mutex
	accepted map[digest.Key]int
	sends    map[digest.Key]int
	lookups  int
	script   func(key digest.Key, attempt int) (accept bool, err error)
	lookup   func(key digest.Key) (found bool, err error) // nil: by accepted
}

func newProvider() *provider {
	return &provider{accepted: map[digest.Key]int{}, sends: map[digest.Key]int{}}
}

func (p *provider) Send(_ context.Context, m *digest.Message) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sends[m.Key]++
	accept, err := true, error(nil)
	if p.script != nil {
		accept, err = p.script(m.Key, p.sends[m.Key])
	}
	if accept {
		p.accepted[m.Key]++
	}
	if err != nil {
		return "", err
	}
	return "ref-" + m.Key.Hex()[:8], nil
}

func (p *provider) Close() error { return nil }

func (p *provider) Lookup(_ context.Context, key digest.Key) (string, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lookups++
	if p.lookup != nil {
		found, err := p.lookup(key)
		return "found-ref", found, err
	}
	return "found-ref", p.accepted[key] > 0, nil
}

func (p *provider) totals() (accepted, dups int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.accepted {
		accepted++
		if n > 1 {
			dups += n - 1
		}
	}
	return
}

type fixture struct {
	t     *testing.T
	clock *clock
	store *sqlite.Store
	src   *snapshot.File
	kr    *digest.Keyring
	want  int    // customers with activity
	path  string // the ledger's SQLite file
}

func newFixture(t *testing.T, customers int) *fixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	clk := &clock{now: time.Date(2026, 10, 6, 6, 0, 0, 0, time.UTC)}
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "ledger.db"), Now: clk.Now, LedgerNow: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "snapshot.jsonl")
	writeSnapshot(t, path, customers)
	src, err := snapshot.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := digest.ParseKeyring("k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for r := range snapshot.Synthetic(customers, runWeek, 1) {
		if len(r.Activity) > 0 {
			want++
		}
	}
	return &fixture{t: t, clock: clk, store: store, src: src, kr: kr, want: want, path: filepath.Join(dir, "ledger.db")}
}

func (f *fixture) runner(p *provider, lookup digest.Lookup, mod func(*run.Config)) *run.Runner {
	f.t.Helper()
	r, err := digest.NewRenderer()
	if err != nil {
		f.t.Fatal(err)
	}
	cfg := run.Config{
		Spec:        digest.Spec{Week: runWeek, Location: time.UTC, Type: "weekly_activity", Version: "v1"},
		Lease:       time.Minute,
		Concurrency: 3,
		BatchSize:   7,
		RunID:       "test",
		Now:         f.clock.Now,
		Sleep:       f.clock.Sleep,
		Backoff:     run.Backoff{Base: time.Minute, Max: time.Hour},
	}
	if mod != nil {
		mod(&cfg)
	}
	return &run.Runner{Ledger: f.store, Mailer: p, Lookup: lookup, Source: f.src, Keyring: f.kr, Renderer: r, Config: cfg}
}

func (f *fixture) run(r *run.Runner) run.Summary {
	f.t.Helper()
	sum, err := r.Run(context.Background())
	if err != nil {
		f.t.Fatalf("run: %v", err)
	}
	return sum
}

func (f *fixture) states() map[digest.State]int64 {
	f.t.Helper()
	c, err := f.store.Counts(context.Background(), runWeek)
	if err != nil {
		f.t.Fatal(err)
	}
	return c.ByState
}

func TestRunSendsOnceThenCountsDuplicates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 40)
	p := newProvider()
	first := f.run(f.runner(p, p, nil))
	if first.Sent != f.want || first.Skipped != 40-f.want || !first.Complete() {
		t.Fatalf("first run: %+v, want %d sent", first, f.want)
	}
	second := f.run(f.runner(p, p, nil))
	if second.Sent != 0 || second.Duplicates != f.want {
		t.Fatalf("second run: %+v, want %d duplicates", second, f.want)
	}
	if acc, dups := p.totals(); acc != f.want || dups != 0 {
		t.Fatalf("provider accepted %d keys with %d duplicates", acc, dups)
	}
	if first.LedgerCalls >= f.want {
		t.Fatalf("ledger calls %d for %d digests: batching is not working", first.LedgerCalls, f.want)
	}
}

// Summary.Retryable is the rows left retryable at the end, not the
// temporary failures met on the way (Retries): a run that ends with every
// row retryable says so, one that retried them to the end leaves none.
func TestSummaryRetryableIsRowsLeft(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 30)
	p := newProvider()
	p.script = func(digest.Key, int) (bool, error) {
		return false, &digest.SendError{Class: digest.SendTemporary, Err: errors.New("451 try later")}
	}
	sum := f.run(f.runner(p, p, func(c *run.Config) { c.Deadline = time.Time{} }))
	if sum.Retryable != f.want || sum.Retries != f.want || sum.Pending != f.want {
		t.Fatalf("summary %+v: want %d rows left retryable after %d temporary failures", sum, f.want, f.want)
	}
	// The next run finds them not due yet: still retryable, no new failure.
	sum = f.run(f.runner(p, p, func(c *run.Config) { c.Deadline = time.Time{} }))
	if sum.Retryable != f.want || sum.Retries != 0 {
		t.Fatalf("second run %+v: want %d rows still retryable (not due), 0 retries", sum, f.want)
	}
}

func TestRunRetriesTemporaryFailuresWithinDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 30)
	p := newProvider()
	retryAt := f.clock.Now().Add(2 * time.Hour)
	p.script = func(_ digest.Key, attempt int) (bool, error) {
		if attempt == 1 {
			return false, &digest.SendError{Class: digest.SendTemporary, RetryAt: retryAt, Err: errors.New("421 try later")}
		}
		return true, nil
	}
	sum := f.run(f.runner(p, p, func(c *run.Config) { c.Deadline = f.clock.Now().Add(3 * time.Hour) }))
	if sum.Retries != f.want || sum.Retryable != 0 || sum.Sent != f.want || sum.Pending != 0 || sum.Passes != 2 {
		t.Fatalf("summary %+v: want %d retryable then sent in a second pass", sum, f.want)
	}
	if !f.clock.Now().Before(retryAt.Add(time.Minute)) || f.clock.Now().Before(retryAt) {
		t.Fatalf("the retry pass ran at %v; Retry-After asked for %v", f.clock.Now(), retryAt)
	}
}

func TestRunLeavesPendingPastDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 20)
	p := newProvider()
	p.script = func(digest.Key, int) (bool, error) {
		return false, &digest.SendError{Class: digest.SendTemporary, Err: errors.New("connection refused")}
	}
	sum := f.run(f.runner(p, p, nil)) // no deadline: no retry pass
	if sum.Complete() || sum.Pending != f.want || sum.Passes != 1 {
		t.Fatalf("summary %+v: want %d pending", sum, f.want)
	}
	if got := f.states()[digest.StateRetryable]; got != int64(f.want) {
		t.Fatalf("%d retryable receipts, want %d", got, f.want)
	}
	// The provider is back: the next run (after the backoff) sends them all.
	p.script = nil
	f.clock.Advance(2 * time.Hour)
	sum = f.run(f.runner(p, p, nil))
	if sum.Sent != f.want || !sum.Complete() {
		t.Fatalf("next run: %+v", sum)
	}
}

func TestRunPermanentFailureIsFinal(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10)
	p := newProvider()
	p.script = func(digest.Key, int) (bool, error) {
		return false, &digest.SendError{Class: digest.SendPermanent, Err: errors.New("550 no such user")}
	}
	sum := f.run(f.runner(p, p, nil))
	if sum.Failed != f.want || !sum.Complete() {
		t.Fatalf("summary %+v", sum)
	}
	p.script = nil
	again := f.run(f.runner(p, p, nil))
	if again.Sent != 0 {
		t.Fatalf("a permanently failed digest was sent again: %+v", again)
	}
}

func TestRunAmbiguousSendIsLookedUpNeverResentBlindly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 24)
	p := newProvider()
	// The provider accepts every message but the connection drops before
	// its reply, on the first attempt only.
	p.script = func(_ digest.Key, attempt int) (bool, error) {
		if attempt == 1 {
			return true, &digest.SendError{Class: digest.SendAmbiguous, Err: errors.New("connection lost after DATA")}
		}
		return true, nil
	}
	began := f.clock.Now()
	sum := f.run(f.runner(p, p, func(c *run.Config) { c.Deadline = f.clock.Now().Add(24 * time.Hour) }))
	if waited := f.clock.Now().Sub(began); waited < 2*time.Minute {
		t.Fatalf("the look-up came %s after the ambiguous send; a provider must get LookupDelay (2m) to list it", waited)
	}
	if sum.Reconciled != f.want || sum.Sent != 0 || sum.Pending != 0 {
		t.Fatalf("summary %+v: want every ambiguous send reconciled by look-up", sum)
	}
	if _, dups := p.totals(); dups != 0 {
		t.Fatalf("%d duplicate messages", dups)
	}
	if sum.LookupsFound != f.want {
		t.Fatalf("look-ups found %d, want %d", sum.LookupsFound, f.want)
	}
}

func TestRunAmbiguousWithoutLookupHoldsOrResends(t *testing.T) {
	t.Parallel()
	for _, policy := range []run.AmbiguousPolicy{run.AmbiguousHold, run.AmbiguousResend} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 16)
			p := newProvider()
			p.script = func(_ digest.Key, attempt int) (bool, error) {
				if attempt == 1 {
					return false, &digest.SendError{Class: digest.SendAmbiguous, Err: errors.New("timeout after DATA")}
				}
				return true, nil
			}
			sum := f.run(f.runner(p, nil, func(c *run.Config) {
				c.Ambiguous = policy
				c.Deadline = f.clock.Now().Add(24 * time.Hour)
			}))
			switch policy {
			case run.AmbiguousHold:
				if sum.Held != f.want || sum.Sent != 0 || !sum.NeedsReview() {
					t.Fatalf("hold: %+v", sum)
				}
				if got := f.states()[digest.StateHeld]; got != int64(f.want) {
					t.Fatalf("%d held receipts, want %d", got, f.want)
				}
			case run.AmbiguousResend:
				if sum.Sent != f.want || sum.Held != 0 {
					t.Fatalf("resend: %+v", sum)
				}
			}
		})
	}
}

// A crash between claim and send leaves claims that are simply sent by the
// next run; a crash after the send started leaves claims that are looked up.
func TestRunAfterCrashDistinguishesNeverSentFromMaybeSent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 12)
	ctx := context.Background()
	p := newProvider()

	// Simulate a crashed run: claim everything, mark half as sending, and
	// deliver a quarter (accepted at the provider, never recorded).
	var keys []digest.Key
	var reqs []digest.ClaimRequest
	for r := range snapshot.Synthetic(12, runWeek, 1) {
		d, err := digest.Build(r, digest.Spec{Week: runWeek, Location: time.UTC, Type: "weekly_activity", Version: "v1"})
		if err != nil || d.Empty() {
			continue
		}
		reqs = append(reqs, digest.ClaimRequest{Keys: f.kr.Candidates(d.Identity), Fingerprint: d.Fingerprint(), Week: runWeek, RunID: "crashed", Lease: time.Minute})
		keys = append(keys, f.kr.Key(d.Identity))
	}
	res, err := f.store.Claim(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	var fences []digest.Fence
	for i := range len(res) / 2 {
		fences = append(fences, digest.Fence{Key: res[i].Key, Token: res[i].Token})
	}
	if _, err := f.store.StartSending(ctx, fences); err != nil {
		t.Fatal(err)
	}
	delivered := map[digest.Key]bool{}
	for i := range len(res) / 4 {
		p.accepted[keys[i]] = 1
		delivered[keys[i]] = true
	}
	f.clock.Advance(2 * time.Minute) // the crashed run's leases expire

	// The maybe-sent ones are looked up only the look-up delay after the
	// takeover (a send that started may still be landing): in a retry pass.
	start := f.clock.Now()
	sum := f.run(f.runner(p, p, func(c *run.Config) { c.Deadline = start.Add(time.Hour) }))
	maybe := len(res) / 2
	if sum.Reconciled != len(res)/4 || sum.Sent != len(res)-len(res)/4 {
		t.Fatalf("summary %+v: want %d reconciled and %d sent", sum, len(res)/4, len(res)-len(res)/4)
	}
	if sum.Passes != 2 || f.clock.Now().Sub(start) < 2*time.Minute {
		t.Fatalf("looked up in pass %d, %s after the takeover; want a retry pass after the look-up delay (2m)", sum.Passes, f.clock.Now().Sub(start))
	}
	if p.lookups != maybe {
		t.Fatalf("%d look-ups, want %d: only claims whose send started may be looked up", p.lookups, maybe)
	}
	if _, dups := p.totals(); dups != 0 {
		t.Fatalf("%d duplicates", dups)
	}
}

func TestRunObserveSendsNothingAndChangesNoReceipt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 20)
	p := newProvider()
	sum := f.run(f.runner(p, p, func(c *run.Config) { c.Mode = run.ModeObserve }))
	if sum.Observed != f.want || sum.Would["claimed"] != f.want || sum.Sent != 0 {
		t.Fatalf("observe: %+v", sum)
	}
	if len(p.sends) != 0 || len(f.states()) != 0 {
		t.Fatalf("observe mode sent %d messages or wrote receipts %v", len(p.sends), f.states())
	}
	f.clock.Advance(time.Minute)
	again := f.run(f.runner(p, p, func(c *run.Config) { c.Mode = run.ModeObserve }))
	if again.Repeats[run.AgeUnder5Min] != f.want {
		t.Fatalf("repeats: %+v", again.Repeats)
	}
	// After a real run, observe reports what the ledger would say.
	f.run(f.runner(p, p, nil))
	after := f.run(f.runner(p, p, func(c *run.Config) { c.Mode = run.ModeObserve }))
	if after.Would["already_sent"] != f.want {
		t.Fatalf("observe after sending: %+v", after.Would)
	}
}

func TestRunInterruptedLeavesNothingClaimed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 60)
	p := newProvider()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	p.script = func(digest.Key, int) (bool, error) {
		once.Do(cancel) // SIGTERM arrives during the first send
		return true, nil
	}
	r := f.runner(p, p, nil)
	sum, err := r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Interrupted || sum.Complete() {
		t.Fatalf("summary %+v: want interrupted", sum)
	}
	st := f.states()
	if st[digest.StateClaimed] != 0 || st[digest.StateHeld] != 0 {
		t.Fatalf("after the interrupt: %v; nothing may stay claimed or held", st)
	}
	acc, _ := p.totals()
	if int64(acc) != st[digest.StateSent] {
		t.Fatalf("provider accepted %d, ledger records %d sent: a send under way was not recorded", acc, st[digest.StateSent])
	}
	// The next run sends the rest at once: released claims are due now.
	next := f.run(f.runner(p, p, nil))
	if next.Reconciled != 0 || next.Held != 0 || !next.Complete() {
		t.Fatalf("next run: %+v", next)
	}
	if acc, dups := p.totals(); acc != f.want || dups != 0 {
		t.Fatalf("accepted %d (want %d), %d duplicates", acc, f.want, dups)
	}
}

func TestRunCohortSplitsStablyAndShardsPartition(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 50)
	p := newProvider()
	pct := 30
	sum := f.run(f.runner(p, p, func(c *run.Config) { c.EnforcePercent = &pct }))
	if sum.Sent+sum.Observed != f.want || sum.Sent == 0 || sum.Observed == 0 {
		t.Fatalf("cohort: %+v", sum)
	}
	again := f.run(f.runner(p, p, func(c *run.Config) { c.EnforcePercent = &pct }))
	if again.Duplicates != sum.Sent || again.Sent != 0 {
		t.Fatalf("the cohort is not stable: first sent %d, then %+v", sum.Sent, again)
	}

	g := newFixture(t, 50)
	q := newProvider()
	total := 0
	for i := range 3 {
		s := g.run(g.runner(q, q, func(c *run.Config) { c.Shard = digest.Shard{Index: i, Count: 3} }))
		total += s.Sent
	}
	if acc, dups := q.totals(); total != g.want || acc != g.want || dups != 0 {
		t.Fatalf("shards sent %d (provider %d, %d dups), want %d", total, acc, dups, g.want)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	bad := []func(*run.Config){
		func(c *run.Config) { c.Spec.Type = "" },
		func(c *run.Config) { c.Spec.Version = "a|b" },
		func(c *run.Config) { c.Mode = "loud" },
		func(c *run.Config) { n := 101; c.EnforcePercent = &n },
		func(c *run.Config) { c.Ambiguous = "maybe" },
		func(c *run.Config) { c.Shard = digest.Shard{Index: 3, Count: 3} },
		func(c *run.Config) { c.Lease = time.Millisecond },
		func(c *run.Config) { c.Concurrency = -1 },
	}
	for i, mod := range bad {
		cfg := run.Config{Spec: digest.Spec{Week: runWeek, Type: "weekly_activity", Version: "v1"}}
		mod(&cfg)
		if err := cfg.Validate(); !errors.Is(err, run.ErrConfig) {
			t.Errorf("case %d: Validate() = %v, want ErrConfig", i, err)
		}
	}
}

func writeSnapshot(t *testing.T, path string, n int) {
	t.Helper()
	f, err := createFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := snapshot.WriteJSONL(f, snapshot.Synthetic(n, runWeek, 1)); err != nil {
		t.Fatal(fmt.Errorf("write snapshot: %w", err))
	}
}

func createFile(path string) (*os.File, error) { return os.Create(path) }

// checkInterrupted is a source whose up-front check sees SIGTERM.
type checkInterrupted struct {
	*snapshot.File
	cancel context.CancelFunc
}

func (c checkInterrupted) Check(ctx context.Context) error {
	c.cancel()
	<-ctx.Done()
	return fmt.Errorf("check: %w", ctx.Err())
}

func TestRunInterruptedDuringCheckIsNotARefusal(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 5)
	p := newProvider()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := f.runner(p, p, nil)
	r.Source = checkInterrupted{File: f.src, cancel: cancel}
	sum, err := r.Run(ctx)
	if err != nil || !sum.Interrupted || len(p.sends) != 0 {
		t.Fatalf("Run = %+v, %v; want interrupted, no error, nothing sent", sum, err)
	}
}

// A crash can leave digests marked as sending that were never sent; the
// next run must look each of them up, or hold it. The pipeline keeps that
// window to about two chunks of StartSending, not a whole claim batch.
func TestRunKeepsTheMaybeSentWindowSmall(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 400)
	p := newProvider()
	stuck := make(chan struct{})
	var sends int
	var mu sync.Mutex
	accepted := map[digest.Key]bool{} // sent, perhaps not yet recorded
	p.script = func(k digest.Key, _ int) (bool, error) {
		mu.Lock()
		sends++
		n := sends
		if n <= 3 {
			accepted[k] = true
		}
		mu.Unlock()
		if n > 3 {
			<-stuck // the process hangs mid-week, as just before a SIGKILL
		}
		return true, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := f.runner(p, p, func(c *run.Config) { c.BatchSize = 100; c.Concurrency = 2; c.Grace = time.Second })
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()

	marked := func() int {
		rs, err := f.store.List(context.Background(), ledger.ListFilter{State: digest.StateClaimed, Limit: 1000})
		if err != nil {
			t.Error(err)
			return 0
		}
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, rc := range rs {
			// A claim the provider accepted stays "claimed, send started"
			// until its finish is written, which a loaded machine may
			// delay: it is sent, not in the window measured here.
			if rc.SendStarted && !accepted[rc.Key] {
				n++
			}
		}
		return n
	}
	// Wait until the pipeline is full (the marks stop growing), then check.
	const window = 25 + 25 + 2 // two chunks of max(4×2, 25), and the sends in flight
	most, same := 0, 0
	tick := time.NewTicker(10 * time.Millisecond)
	deadline := time.After(2 * time.Minute) // a hang, not a slow machine: load slows the marks (51 of 52 at 20 s, load 18)
	for same < 30 {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the pipeline never settled (marked %d)", most)
		}
		if n := marked(); n > most {
			most, same = n, 0
		} else if most > 0 {
			same++
		}
	}
	tick.Stop()
	close(stuck)
	cancel()
	<-done
	if most > window || most < 25 {
		t.Fatalf("%d claims marked as sending but not sent; want the window filled to at most %d", most, window)
	}
}
