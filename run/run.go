package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// Mode says whether a run sends.
type Mode string

// Run modes.
const (
	// ModeEnforce: the ledger decides and digests are sent.
	ModeEnforce Mode = "enforce"
	// ModeObserve: a dry run. Everything is built and keyed, observations
	// are recorded with what the ledger would decide; nothing is sent and
	// no receipt changes.
	ModeObserve Mode = "observe"
)

// AmbiguousPolicy says what to do with a claim whose earlier send may have
// reached the provider when no look-up can tell.
type AmbiguousPolicy string

// Ambiguous policies.
const (
	AmbiguousHold   AmbiguousPolicy = "hold"   // hold for operator review (the default)
	AmbiguousResend AmbiguousPolicy = "resend" // send again, accepting a possible duplicate
)

// Config configures one run. The zero value of each optional field has
// the documented default; Validate reports what is wrong.
type Config struct {
	Spec digest.Spec // week, zone, type and content version

	Mode Mode // default ModeEnforce
	// EnforcePercent, with ModeEnforce, enforces for a stable percentage of
	// customers (InCohort) and observes the rest: a cohort rollout. Nil
	// means 100.
	EnforcePercent *int
	Shard          digest.Shard
	Ambiguous      AmbiguousPolicy // default AmbiguousHold

	// Lease is how long a claim is exclusive; default DefaultLease. The
	// run renews the leases of the claims it holds every quarter lease, so
	// a crashed run's claims are free again at most a lease after the
	// crash. A send starts only while the lease covers SendWorstCase plus
	// a margin (a tenth of the lease), and is cut off at the lease's end
	// minus that margin.
	Lease time.Duration
	// SendWorstCase is the longest one send may take: the mailer's dial
	// plus exchange timeouts. Validate refuses a lease shorter than twice
	// it. Zero: the mailer has no network (the file outbox).
	SendWorstCase time.Duration
	// Rate is the process's send rate in messages per second (DIGEST_RATE),
	// 0 for unlimited. It sizes what the run claims ahead (a quarter
	// lease's worth of sends) and the "send started" chunks (half a
	// second's worth), so that neither outgrows what the limiter sends.
	Rate float64
	// Deadline bounds the retry passes: rows that come due before it are
	// retried in this run. Zero means no retry pass.
	Deadline time.Time
	// Grace is how long in-flight sends and their ledger writes may take
	// after the context is cancelled (SIGTERM). Default 20s.
	Grace time.Duration

	Concurrency int // parallel sends; default 4
	BatchSize   int // keys per ledger round trip; default 100

	SendEmpty bool // send digests with no activity (default: skip them)
	// AllowEmpty lets a run proceed when the source holds no customer at
	// all (default: refused, since an unloaded source would otherwise look
	// like a week that was sent).
	AllowEmpty bool
	Lenient    bool // skip bad source records instead of refusing the run

	// Settle is how long after the week's end (in Spec.Location) its
	// cutoff lies: the as_of a run that may send pins is the end plus
	// Settle, whenever it runs. Default DefaultSettle.
	Settle time.Duration
	// EarlyCutoff lets a run that may send pin a week before its cutoff:
	// as_of is then now, and the pin is marked partial. Without it such a
	// run fails with *BeforeCutoffError before anything is pinned.
	EarlyCutoff bool

	ReplayHorizon time.Duration // for the repeat report; default 90 days
	// ObserveSample is how many would-be recipients an observe run logs
	// ("would send", by key), so that a dry run shows whom it would reach,
	// not only how many. Default 10; negative: none.
	ObserveSample int
	// ObserveAddresses adds the address to each sampled line. Off by
	// default: logs carry keys, not customer data.
	ObserveAddresses bool
	// ResendPrunedWeek lets an enforce run send a week whose receipts were
	// pruned (a PruneTombstone): the digests whose receipts went are sent
	// a second time. Without it such a run fails with *PrunedWeekError.
	ResendPrunedWeek bool
	// ResendAsNewVersion lets an enforce run send a week already sent (or
	// in flight) under another content version of its type: every
	// customer gets the week again, under this version. Who and why are
	// recorded on the pin, and later runs of the version go on without
	// it. Nil: such a run fails with *VersionResendError.
	ResendAsNewVersion *ResendAsNewVersion
	// LookupDelay is the least time between an ambiguous send and the
	// look-up that decides it. Providers list an accepted message only
	// after they have processed it; asked too early, they answer "not
	// found" and the digest would go out twice. Default 2 minutes. A
	// claim taken over from a crashed or stalled run whose send had
	// started waits as long past the takeover.
	LookupDelay time.Duration
	Backoff     Backoff
	// Preflight, when set, is called in enforce mode before the week is
	// pinned or anything claimed: for an SMTP mailer, a session without a
	// message (smtp.CheckConnection). An error of digest.SendFatal stops the run
	// with ErrMailerUnusable, any other with ErrMailerUnreachable.
	Preflight func(ctx context.Context) error

	RunID  string                                           // transport identity, for the history only
	Now    func() time.Time                                 // default time.Now
	Sleep  func(ctx context.Context, d time.Duration) error // default: a timer
	Logger *slog.Logger                                     // default: discard
	// Tracer reports the run's spans (see Tracer); default: none. The
	// Logger is called with the context of the span its record is made
	// under.
	Tracer Tracer
}

// ErrConfig is wrapped by Config.Validate's errors.
var ErrConfig = errors.New("invalid run configuration")

// Lease bounds. DefaultLease is renewed while the run holds the claim, so
// it only says how long a crashed run's claims stay locked: a retried pod
// waits at most this long (and, for a digest whose send had started, the
// look-up delay more) before it takes them over.
const (
	DefaultLease = 45 * time.Second
	MinLease     = time.Second
	MaxLease     = 24 * time.Hour
)

func (c *Config) setDefaults() {
	if c.Mode == "" {
		c.Mode = ModeEnforce
	}
	if c.Ambiguous == "" {
		c.Ambiguous = AmbiguousHold
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.Grace == 0 {
		c.Grace = 20 * time.Second
	}
	if c.Concurrency == 0 {
		c.Concurrency = 4
	}
	if c.BatchSize == 0 {
		c.BatchSize = 100
	}
	if c.LookupDelay == 0 {
		c.LookupDelay = 2 * time.Minute
	}
	if c.ReplayHorizon == 0 {
		c.ReplayHorizon = 90 * 24 * time.Hour
	}
	if c.Spec.Location == nil {
		c.Spec.Location = time.UTC
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Sleep == nil {
		c.Sleep = Sleep
	}
	if c.Settle == 0 {
		c.Settle = DefaultSettle
	}
	if c.ObserveSample == 0 {
		c.ObserveSample = 10
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Tracer == nil {
		c.Tracer = noTracer{}
	}
}

// Validate applies defaults and checks the configuration.
func (c *Config) Validate() error {
	c.setDefaults()
	probe := digest.Identity{Customer: "x", Week: c.Spec.Week, Type: c.Spec.Type, Version: c.Spec.Version}
	switch err := probe.Validate(); {
	case err != nil:
		return fmt.Errorf("%w: %v", ErrConfig, err)
	case c.Mode != ModeEnforce && c.Mode != ModeObserve:
		return fmt.Errorf("%w: mode %q: want enforce or observe", ErrConfig, c.Mode)
	case c.EnforcePercent != nil && (*c.EnforcePercent < 0 || *c.EnforcePercent > 100):
		return fmt.Errorf("%w: cohort %d%%: want 0 to 100", ErrConfig, *c.EnforcePercent)
	case c.Ambiguous != AmbiguousHold && c.Ambiguous != AmbiguousResend:
		return fmt.Errorf("%w: ambiguous policy %q: want hold or resend", ErrConfig, c.Ambiguous)
	case c.Shard.Count > 1 && (c.Shard.Index < 0 || c.Shard.Index >= c.Shard.Count):
		return fmt.Errorf("%w: shard %d/%d: index must be 0 to %d", ErrConfig, c.Shard.Index, c.Shard.Count, c.Shard.Count-1)
	case c.Spec.Location == time.Local || c.Spec.Location.String() == "Local":
		// The local zone is whatever the pod happens to have: another pod
		// would compute other week bounds and so other fingerprints.
		return fmt.Errorf("%w: time zone Local: name the zone, e.g. Europe/Berlin or UTC", ErrConfig)
	case c.Settle < 0:
		return fmt.Errorf("%w: settle %s must not be negative", ErrConfig, c.Settle)
	case c.Lease < MinLease:
		return fmt.Errorf("%w: lease %s: at least %s", ErrConfig, c.Lease, MinLease)
	case c.Lease > MaxLease:
		return fmt.Errorf("%w: lease %s: at most %s (it is renewed while the run holds the claim; a long lease only keeps a crashed run's claims locked)", ErrConfig, c.Lease, MaxLease)
	case c.SendWorstCase < 0 || c.Rate < 0:
		return fmt.Errorf("%w: send worst case %s and rate %v must not be negative", ErrConfig, c.SendWorstCase, c.Rate)
	case c.Lease < 2*c.SendWorstCase:
		return fmt.Errorf("%w: lease %s is too short for sends that may take %s (SMTP dial + exchange timeouts): want a lease of at least %s, or a shorter DIGEST_SMTP_TIMEOUT",
			ErrConfig, c.Lease, c.SendWorstCase, 2*c.SendWorstCase)
	case c.Concurrency < 1 || c.Concurrency > 256:
		return fmt.Errorf("%w: concurrency %d: want 1 to 256", ErrConfig, c.Concurrency)
	case c.BatchSize < 1 || c.BatchSize > 1000:
		return fmt.Errorf("%w: batch size %d: want 1 to 1000", ErrConfig, c.BatchSize)
	}
	return nil
}

// Sleep waits d, or until ctx is done (then it returns ctx's error): the
// default Config.Sleep, and "digest schedule"'s wait between retries.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Runner runs one week: it streams the snapshot, claims each digest's key
// in the ledger, sends what it may, and records every outcome.
type Runner struct {
	Ledger   digest.Ledger
	Mailer   digest.Mailer // nil only in ModeObserve
	Lookup   digest.Lookup // nil: no provider look-up; Config.Ambiguous decides
	Source   digest.Source
	Keyring  *digest.Keyring
	Renderer *digest.Renderer
	Config   Config
	// Unsubscribe, when set, returns a customer's own unsubscribe URI
	// (see package unsubscribe); the mailer puts it in List-Unsubscribe.
	Unsubscribe func(customerID string) string
	// Listed, when set, is told each customer the run finds on the
	// ledger's suppression list (by customer or address) and so does not
	// send: weekstatus.Reader counts it as suppressed in the week's
	// expectation.
	Listed func(customerID string)

	pinnedKeys   *digest.Keyring // Keyring with the week's pinned key id first, set by run
	counters     counters
	claimLatency LatencyHistogram
	stages       stageTimes

	failures failureKinds
	// busyQuick: recheck keys another run holds after busyRecheck rather
	// than at their lease's expiry (see route).
	busyQuick bool
}

// ClaimLatency returns the histogram of claim round trips (one sample per
// digest, the duration of the batch call that claimed it).
func (r *Runner) ClaimLatency() *LatencyHistogram { return &r.claimLatency }

// Progress returns the counters so far; safe to call while Run runs.
func (r *Runner) Progress() Summary { return r.counters.snapshot() }

// Run runs the week to the end, through retry passes until nothing is
// pending or the next due row lies past the deadline. Cancelling ctx stops
// claiming; sends already under way finish and are recorded within the
// grace period, and the summary is marked Interrupted.
//
// The error is non-nil when the run could not proceed (ledger, source or
// configuration); the summary still counts what was done.
func (r *Runner) Run(ctx context.Context) (Summary, error) {
	cfg := &r.Config
	if err := cfg.Validate(); err != nil {
		return Summary{}, err
	}
	if r.Ledger == nil || r.Source == nil || r.Keyring == nil || r.Renderer == nil {
		return Summary{}, fmt.Errorf("%w: runner needs a ledger, a source, a keyring and a renderer", ErrConfig)
	}
	if r.Mailer == nil && (cfg.Mode != ModeObserve) {
		return Summary{}, fmt.Errorf("%w: enforce mode needs a mailer", ErrConfig)
	}
	start := cfg.Now()
	ctx, span := r.startRunSpan(ctx)
	sum, err := r.run(ctx)
	sum.Duration = cfg.Now().Sub(start)
	sum.ClaimP50, sum.ClaimP99 = r.claimLatency.Quantile(0.50), r.claimLatency.Quantile(0.99)
	sum.Failures = r.failures.snapshot()
	sum.Stages = r.stages.snapshot()
	if ctx.Err() != nil {
		sum.Interrupted = true
	}
	endRunSpan(span, sum, err)
	return sum, err
}

func (r *Runner) run(ctx context.Context) (Summary, error) {
	cfg := &r.Config
	log := cfg.Logger
	if err := r.refuseBeforeCutoff(); err != nil {
		return r.counters.snapshot(), err
	}
	if !cfg.AllowEmpty {
		if err := r.refuseEmptySource(ctx); err != nil {
			return r.counters.snapshot(), err
		}
	}
	if err := r.preflight(ctx); err != nil {
		return r.counters.snapshot(), err
	}
	pin := digest.SnapshotPin{Type: cfg.Spec.Type, Week: cfg.Spec.Week, Version: cfg.Spec.Version}
	resent, err := r.checkVersions(ctx, pin)
	if err != nil {
		return r.counters.snapshot(), err
	}
	if err := r.checkPruned(ctx, pin); err != nil {
		return r.counters.snapshot(), err
	}
	weekPin, err := r.weekPin(ctx, pin, resent)
	if err != nil {
		return r.counters.snapshot(), err
	}
	if r.pinnedKeys, err = r.checkWeekPin(weekPin); err != nil {
		return r.counters.snapshot(), err
	}
	r.warnCutoff(ctx, weekPin)
	asOf := weekPin.AsOf
	log.InfoContext(ctx, "run starting", "week", cfg.Spec.Week.String(), "type", cfg.Spec.Type, "version", cfg.Spec.Version,
		"mode", string(cfg.Mode), "shard", cfg.Shard.String(), "as_of", asOf) // the command's logger carries run_id

	if ch, ok := r.Source.(digest.Checker); ok && !cfg.Lenient {
		if err := ch.Check(ctx); err != nil {
			if ctx.Err() != nil {
				return r.counters.snapshot(), nil // interrupted while checking: nothing claimed
			}
			if list, ok := err.(interface{ Unwrap() []error }); ok {
				for _, e := range list.Unwrap() {
					if bad, ok := errors.AsType[*digest.BadRecordError](e); ok {
						log.ErrorContext(ctx, "bad snapshot record", r.badRecordAttrs(bad)...)
					}
				}
			}
			return r.counters.snapshot(), fmt.Errorf("snapshot refused, nothing sent (use lenient mode to send the valid records): %w", err)
		}
	}

	all := digest.SourceQuery{Week: cfg.Spec.Week, Location: cfg.Spec.Location, AsOf: asOf, Shard: cfg.Shard}
	passes, deadPasses := 0, 0
	r.busyQuick = true
	var left *pendingCustomers // what the last pass left pending; nil: read everyone
	finish := func(err error) (Summary, error) {
		s := r.counters.snapshot()
		s.Passes = passes
		return s, err
	}
	for {
		passes++
		p := &pass{runner: r, number: passes}
		q, carried := all, &pendingCustomers{}
		if left != nil {
			// A retry pass reads only the customers due again; the rest
			// wait for a later pass and count as pending meanwhile.
			q.Customers, carried = left.split(cfg.Now())
			p.pendingOnly = true
		}
		r.counters.pending.Store(int64(len(carried.due)))
		r.counters.retryable.Store(int64(carried.retryables()))
		err := p.runTraced(ctx, q)
		if err != nil && !errors.Is(err, ErrMailerUnreachable) {
			return finish(err)
		}
		if p.streak.dead() {
			deadPasses++
		} else {
			deadPasses = 0
		}
		if err == nil && deadPasses >= deadPassesToStop {
			err = fmt.Errorf("%w: every send of the last %d passes failed to connect", ErrMailerUnreachable, deadPasses)
		}
		if err != nil {
			log.ErrorContext(ctx, "stopping early: the mail server is unreachable; the next run continues", "pending", r.counters.pending.Load(), "err", err)
			return finish(err)
		}
		r.busyQuick = passes > 1 && p.settledByOthers.Load() > 0
		p.left.merge(carried)
		left = &p.left
		if left.overflow {
			left = nil
		}
		next := p.nextDue.get()
		if first := carried.earliest(); !first.IsZero() && (next.IsZero() || first.Before(next)) {
			next = first
		}
		pending := r.counters.pending.Load()
		if pending == 0 || ctx.Err() != nil || next.IsZero() || cfg.Deadline.IsZero() || next.After(cfg.Deadline) {
			if pending > 0 && ctx.Err() == nil {
				log.InfoContext(ctx, "rows left pending", "pending", pending, "next_due", next, "deadline", cfg.Deadline)
			}
			break
		}
		if left != nil {
			// Wake for the first due row and those due shortly after
			// it: one pass for a spread of jittered backoffs or lease
			// expiries, not one each.
			if last := left.lastWithin(next, retryCoalesce(cfg.Lease)); !last.After(cfg.Deadline) {
				next = last
			}
		}
		// A retry that came due during the pass is due now, not "in -5m".
		wait := max(next.Sub(cfg.Now()), 0)
		log.InfoContext(ctx, "retry pass scheduled", "pending", pending, "in", wait.Round(time.Millisecond), "pass", passes+1)
		if wait > 0 {
			if err := cfg.Sleep(ctx, wait); err != nil {
				break
			}
		}
	}
	return finish(nil)
}

// preflight runs Config.Preflight in enforce mode, before anything is
// claimed.
func (r *Runner) preflight(ctx context.Context) error {
	cfg := &r.Config
	if cfg.Preflight == nil || cfg.Mode != ModeEnforce {
		return nil
	}
	err := cfg.Preflight(ctx)
	switch {
	case err == nil || ctx.Err() != nil:
		return nil // interrupted: the run stops before claiming
	case digest.SendClassOf(err) == digest.SendFatal:
		return fmt.Errorf("%w (nothing claimed): %w", ErrMailerUnusable, err)
	default:
		return fmt.Errorf("%w (nothing claimed): %w", ErrMailerUnreachable, err)
	}
}

// checkWeekPin refuses a run that would not compute the keys and
// fingerprints of the week's earlier runs, before anything is claimed: a
// zone other than the pinned one (every fingerprint would differ and every
// receipt be quarantined), or a keyring that lacks a key id the week's
// receipts are stored under (each of those digests would be sent again
// under a new key). It returns the keyring to key the week with: the
// pinned key id first.
//
// The receipts counted are those of the ISO week, every digest type and
// content version (receipts store the week, not the type): a key id still
// used by any of them must stay in the keyring.
func (r *Runner) checkWeekPin(weekPin digest.WeekPin) (*digest.Keyring, error) {
	cfg := &r.Config
	if zone := cfg.Spec.Location.String(); weekPin.Zone != zone {
		return nil, fmt.Errorf("%w: week %s (%s %s) is pinned to time zone %s by its first run; this run's is %s, which would move the week's bounds and quarantine every receipt: run it with DIGEST_TZ=%s",
			ErrConfig, cfg.Spec.Week, cfg.Spec.Type, cfg.Spec.Version, weekPin.Zone, zone, weekPin.Zone)
	}
	var missing []string
	for kid, n := range weekPin.ReceiptsByKeyID {
		if _, ok := r.Keyring.Pinned(kid); !ok && n > 0 {
			missing = append(missing, fmt.Sprintf("%d under key id %s", n, kid))
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("%w: the keyring (%s) lacks key ids that receipts of week %s are stored under: %s; each of those digests would be sent again. Put the key ids back in the keyring, after the current one",
			ErrConfig, strings.Join(r.Keyring.IDs(), ","), cfg.Spec.Week, strings.Join(missing, ", "))
	}
	keys, ok := r.Keyring.Pinned(weekPin.KeyID)
	if !ok {
		// No receipt under it yet, but a run holding it may be creating
		// them now: another key id would make two receipts for one digest.
		return nil, fmt.Errorf("%w: week %s (%s %s) is pinned to key id %s by its first run (0 receipts under it so far), and the keyring (%s) lacks it. Put it back in the keyring, after the current one",
			ErrConfig, cfg.Spec.Week, cfg.Spec.Type, cfg.Spec.Version, weekPin.KeyID, strings.Join(r.Keyring.IDs(), ","))
	}
	return keys, nil
}

// refuseEmptySource refuses a run whose source holds no customer at all,
// in any shard, before the week is pinned: a source not yet loaded would
// otherwise end in exit 0 with nothing sent, and pin an as_of that leaves
// out what is loaded later. A source that yields only bad records is not
// empty; the strict check reports those.
func (r *Runner) refuseEmptySource(ctx context.Context) error {
	cfg := &r.Config
	q := digest.SourceQuery{Week: cfg.Spec.Week, Location: cfg.Spec.Location, AsOf: cfg.Now()}
	for _, err := range r.Source.Records(ctx, q) {
		var bad *digest.BadRecordError
		if err != nil && !errors.As(err, &bad) {
			return fmt.Errorf("read snapshot: %w", err)
		}
		return nil
	}
	if ctx.Err() != nil {
		return nil // interrupted: the run stops before claiming
	}
	return fmt.Errorf("%w: the source holds no customers at all (nothing to send for week %s); load it first, or pass --allow-empty if an empty week is expected", ErrConfig, cfg.Spec.Week)
}

// nextDueTracker keeps the earliest time a pending row becomes claimable.
type nextDueTracker struct {
	mu sync.Mutex
	at time.Time
}

func (t *nextDueTracker) offer(at time.Time) {
	if at.IsZero() {
		return
	}
	t.mu.Lock()
	if t.at.IsZero() || at.Before(t.at) {
		t.at = at
	}
	t.mu.Unlock()
}

func (t *nextDueTracker) get() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.at
}

// badRecordAttrs are the log attributes of a bad record: where it is, the
// field and what is wrong, and for a malformed address its address_key,
// never the address (docs/security.md).
func (r *Runner) badRecordAttrs(bad *digest.BadRecordError) []any {
	attrs := []any{"where", bad.Where, "field", bad.Field, "err", bad.Err}
	if ae, ok := errors.AsType[*digest.AddressError](bad); ok && r.Keyring != nil {
		attrs = append(attrs, "address_key", r.Keyring.AddressKey(ae.Address))
	}
	return attrs
}
