// Package verify checks a week of the ledger against the mail provider:
// the rollout gate "one semantic digest produces one accepted external
// operation and one durable sent receipt", as "digest verify" runs it.
//
// For every sent receipt of the week (or a uniform sample of them) it asks
// the provider how many messages carry the receipt's key: one agrees, none
// is a receipt without a message (deleted, or never accepted), two or more
// a digest sent twice. Where the provider can list the keys of the
// messages it holds (Mailpit, the file outbox), it also looks for messages
// whose key is a receipt of the week that is not sent: mail that went out
// behind the ledger's back (or that a run still holds, or will reconcile).
// Keys are HMACs: a message whose key no receipt of the week has cannot be
// told apart from another week's, and is not reported.
//
// Like package run, verify knows no adapter: it declares the interfaces it
// consumes and imports the domain only.
package verify

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// Counter counts the messages a provider holds for a key.
type Counter interface {
	Count(ctx context.Context, key digest.Key) (int, error)
}

// Lister lists the digest keys of every message a provider holds, a page
// at a time, in no particular order; a key may come more than once.
type Lister interface {
	ListKeys(ctx context.Context, page func([]digest.Key) error) error
}

// Ledger is what verify reads of the receipt ledger (ledger.Store).
type Ledger interface {
	WeekKeys(ctx context.Context, week digest.ISOWeek, state digest.State, after digest.Key, limit int) ([]digest.Key, error)
	WeekStates(ctx context.Context, week digest.ISOWeek, keys []digest.Key) (map[digest.Key]digest.State, error)
}

// Limiter bounds the rate of provider calls (a *rate.Limiter).
type Limiter interface {
	Wait(ctx context.Context) error
}

// Defaults of Config.
const (
	DefaultConcurrency = 4
	DefaultPageSize    = 1000
	// DefaultAttempts is how often a key is asked about when the provider
	// fails temporarily, before it counts as an error.
	DefaultAttempts = 3
	// maxErrorExamples bounds the errors a report keeps whole: a provider
	// that is down fails every key alike.
	maxErrorExamples = 20
)

// Config is one verification.
type Config struct {
	Week     digest.ISOWeek
	Ledger   Ledger
	Provider Counter
	// Lister, when the provider can list, also finds unrecorded messages.
	Lister Lister
	// CountByListing counts each key's messages from the Lister's one pass
	// over the provider instead of one Count call per key: for a provider
	// whose per-key search costs in proportion to what it holds (Mailpit's
	// every search reply lists every tag of the mailbox). It holds a count
	// per listed message of the week (its HMAC's 32 bytes) while it runs.
	CountByListing bool
	// Name names the provider in the report, without credentials.
	Name string
	// Limiter paces the look-ups (not the listing, a page per call). Nil:
	// unpaced, for a local provider such as the file outbox.
	Limiter Limiter
	// Concurrency is how many look-ups run at once. Default 4.
	Concurrency int
	// Sample, when above 0, checks a uniform random sample of that many
	// sent receipts instead of all of them.
	Sample int
	// Rand draws the sample. Default: randomly seeded.
	Rand *rand.Rand
	// PageSize is how many keys one ledger read returns. Default 1000.
	PageSize int
	// Attempts per key against temporary failures. Default 3.
	Attempts int
	// Backoff says how long to wait before retry n (1 for the first) when
	// the provider gave no time. Default: n × 1 s.
	Backoff func(n int) time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Progress is how far a verification has come.
type Progress struct {
	Total      int64 // keys to check, once known (0 while a sample is drawn)
	Checked    int64
	Mismatches int64
	Errors     int64
	Listed     int64
}

// errLedger marks a failure to read the ledger: it stops the verification.
var errLedger = errors.New("ledger")

// Verifier runs one verification; Progress may be read meanwhile.
type Verifier struct {
	cfg                                      Config
	kids                                     map[string]string // key ids of the sent keys, by their lower case
	total, checked, mismatches, errs, listed atomic.Int64
	calls                                    atomic.Int64
}

// New validates cfg and fills its defaults.
func New(cfg Config) (*Verifier, error) {
	if cfg.Week.IsZero() || cfg.Ledger == nil || cfg.Provider == nil {
		return nil, errors.New("verify: a week, a ledger and a provider are required")
	}
	if cfg.Sample < 0 {
		return nil, errors.New("verify: sample must not be negative")
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.Backoff == nil {
		cfg.Backoff = func(n int) time.Duration { return time.Duration(n) * time.Second }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return &Verifier{cfg: cfg, kids: map[string]string{}}, nil
}

// Progress returns the counts so far.
func (v *Verifier) Progress() Progress {
	return Progress{Total: v.total.Load(), Checked: v.checked.Load(), Mismatches: v.mismatches.Load(), Errors: v.errs.Load(), Listed: v.listed.Load()}
}

// Run verifies the week. Its error is for what stops the whole check (the
// ledger unreachable, ctx done); a key the provider cannot be asked about
// is in Report.Errors instead.
func (v *Verifier) Run(ctx context.Context) (*Report, error) {
	start := v.cfg.Now()
	rep := &Report{Week: v.cfg.Week.String(), Provider: v.cfg.Name, Sample: v.cfg.Sample,
		NotFound: []digest.Key{}, Duplicated: []Duplicate{}, Unrecorded: []Unrecorded{}, ErrorExamples: []KeyError{}}
	var sample []digest.Key
	switch {
	case v.cfg.Sample > 0:
		var err error
		if sample, err = v.drawSample(ctx, rep); err != nil {
			return nil, err
		}
	case v.cfg.CountByListing:
		// A first pass for the key ids (a Mailpit tag holds them in lower
		// case) and the number of sent receipts.
		if err := v.sentKeys(ctx, func(page []digest.Key) error { rep.Sent += int64(len(page)); return nil }); err != nil {
			return nil, err
		}
	}
	counter, paced := v.cfg.Provider, true
	if v.cfg.Lister != nil {
		rep.UnrecordedChecked = true
		listed, err := v.list(ctx, rep)
		switch {
		case err != nil && (ctx.Err() != nil || errors.Is(err, errLedger)):
			return nil, err
		case err != nil:
			rep.Errors++
			v.errs.Add(1)
			rep.ErrorExamples = append(rep.ErrorExamples, KeyError{Error: "list the provider's messages: " + err.Error()})
			counter = nil // the counts are incomplete: nothing is checked
		case v.cfg.CountByListing:
			counter, paced = listed, false
		}
	}
	if counter != nil || !v.cfg.CountByListing {
		if err := v.checkSent(ctx, rep, sample, counter, paced); err != nil {
			return nil, err
		}
	}
	slices.Sort(rep.NotFound)
	slices.SortFunc(rep.Duplicated, func(a, b Duplicate) int { return cmpKey(a.Key, b.Key) })
	slices.SortFunc(rep.Unrecorded, func(a, b Unrecorded) int { return cmpKey(a.Key, b.Key) })
	rep.ProviderCalls = v.calls.Load()
	rep.Duration = Duration(v.cfg.Now().Sub(start))
	return rep, nil
}

func cmpKey(a, b digest.Key) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sentKeys calls fn with each page of the week's sent keys, in key order.
func (v *Verifier) sentKeys(ctx context.Context, fn func([]digest.Key) error) error {
	var after digest.Key
	for {
		page, err := v.cfg.Ledger.WeekKeys(ctx, v.cfg.Week, digest.StateSent, after, v.cfg.PageSize)
		if err != nil {
			return fmt.Errorf("%w: read the week's sent receipts: %w", errLedger, err)
		}
		if len(page) == 0 {
			return nil
		}
		for _, k := range page {
			if kid := k.KeyID(); v.kids[strings.ToLower(kid)] == "" {
				v.kids[strings.ToLower(kid)] = kid
			}
		}
		if err := fn(page); err != nil {
			return err
		}
		if len(page) < v.cfg.PageSize {
			return nil
		}
		after = page[len(page)-1]
	}
}

// checkSent asks counter about every sent key (or the sample), streaming
// them from the ledger to Concurrency workers; paced: through the Limiter,
// counted as provider calls.
func (v *Verifier) checkSent(ctx context.Context, rep *Report, sample []digest.Key, counter Counter, paced bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	keys := make(chan digest.Key, v.cfg.Concurrency*2)
	var mu sync.Mutex // guards rep
	var wg sync.WaitGroup
	for range v.cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				n, err := v.count(ctx, counter, paced, k)
				mu.Lock()
				v.record(rep, k, n, err)
				mu.Unlock()
			}
		}()
	}
	var feedErr error
	if v.cfg.Sample > 0 {
		v.total.Store(int64(len(sample)))
		for _, k := range sample {
			if feedErr != nil {
				break
			}
			select {
			case keys <- k:
			case <-ctx.Done():
				feedErr = ctx.Err()
			}
		}
	} else {
		counted := rep.Sent > 0 // by the first pass of CountByListing
		feedErr = v.sentKeys(ctx, func(page []digest.Key) error {
			if !counted {
				rep.Sent += int64(len(page))
			}
			v.total.Add(int64(len(page)))
			for _, k := range page {
				select {
				case keys <- k:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
	}
	close(keys)
	if feedErr != nil {
		cancel()
	}
	wg.Wait()
	if feedErr != nil {
		return feedErr
	}
	return ctx.Err()
}

// drawSample reads every sent key of the week once, keeping a uniform
// random sample of Sample of them (reservoir sampling, Algorithm R): the
// week is never held whole.
func (v *Verifier) drawSample(ctx context.Context, rep *Report) ([]digest.Key, error) {
	sample := make([]digest.Key, 0, v.cfg.Sample)
	var seen int64
	err := v.sentKeys(ctx, func(page []digest.Key) error {
		for _, k := range page {
			seen++
			if len(sample) < v.cfg.Sample {
				sample = append(sample, k)
			} else if j := v.cfg.Rand.Int64N(seen); j < int64(v.cfg.Sample) {
				sample[j] = k
			}
		}
		return nil
	})
	rep.Sent = seen
	return sample, err
}

// count asks counter about k, retrying temporary failures; paced: through
// the Limiter, and counted as a provider call.
func (v *Verifier) count(ctx context.Context, counter Counter, paced bool, k digest.Key) (int, error) {
	for attempt := 1; ; attempt++ {
		if paced {
			if err := v.wait(ctx); err != nil {
				return 0, err
			}
		}
		n, err := counter.Count(ctx, k)
		if err == nil || attempt >= v.cfg.Attempts || ctx.Err() != nil {
			return n, err
		}
		var se *digest.SendError
		if errors.As(err, &se) && se.Class == digest.SendPermanent {
			return 0, err
		}
		wait := v.cfg.Backoff(attempt)
		if se != nil && !se.RetryAt.IsZero() {
			wait = se.RetryAt.Sub(v.cfg.Now())
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		}
	}
}

// record adds one key's answer to rep (under the caller's lock).
func (v *Verifier) record(rep *Report, k digest.Key, n int, err error) {
	switch {
	case err != nil:
		rep.Errors++
		v.errs.Add(1)
		if len(rep.ErrorExamples) < maxErrorExamples {
			rep.ErrorExamples = append(rep.ErrorExamples, KeyError{Key: k, Error: err.Error()})
		}
		return
	case n == 1:
		rep.FoundOnce++
	case n == 0:
		rep.NotFound = append(rep.NotFound, k)
		v.mismatches.Add(1)
	default:
		rep.Duplicated = append(rep.Duplicated, Duplicate{Key: k, Count: n})
		v.mismatches.Add(1)
	}
	rep.Checked++
	v.checked.Add(1)
}

// wait takes a token of the Limiter and counts a provider call.
func (v *Verifier) wait(ctx context.Context) error {
	if v.cfg.Limiter != nil {
		if err := v.cfg.Limiter.Wait(ctx); err != nil {
			return err
		}
	}
	v.calls.Add(1)
	return nil
}
