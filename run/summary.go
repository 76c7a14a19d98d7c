package run

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// Age buckets for repeats: how long after the earlier event the same key
// came again. The first is the window a queue's duplicate filter covers; the
// rest are what the ledger is for.
const (
	AgeUnder5Min     = iota // under five minutes
	AgeSameDay              // under 24 hours
	AgeLater                // within the replay horizon
	AgeBeyondHorizon        // older than the replay horizon
	numAgeBuckets
)

// AgeBucketNames names the age buckets, index by index.
var AgeBucketNames = [numAgeBuckets]string{"under_5m", "same_day", "later", "beyond_horizon"}

// AgeBucket returns the bucket of a repeat gap.
func AgeBucket(gap, horizon time.Duration) int {
	switch {
	case gap < 5*time.Minute:
		return AgeUnder5Min
	case gap < 24*time.Hour:
		return AgeSameDay
	case horizon <= 0 || gap <= horizon:
		return AgeLater
	default:
		return AgeBeyondHorizon
	}
}

// Summary counts what a run did. Counters cover the whole run, the retry
// passes included; Pending is what the last pass left unsettled.
type Summary struct {
	Sent        int // accepted by the provider in this run
	Reconciled  int // found at the provider by a look-up and marked sent, not sent again
	Duplicates  int // already sent before this run: nothing sent
	Quarantined int // fingerprint differs from the stored one: nothing sent
	Held        int // waiting for an operator
	// Retryable counts the rows the run left retryable at its end (a
	// temporary failure, a maybe-sent digest waiting for its look-up, or
	// a retryable receipt not due yet), a part of Pending: what a later
	// run has to finish. An exit-0 run leaves none.
	Retryable int
	Retries   int // temporary failures recorded, events (a key that failed twice counts twice)
	// Throttled counts the sends and look-ups the provider refused for
	// everyone (SMTP 421, HTTP 429: digest.SendError.Throttled), a part
	// of the temporary failures: slow down. Per-recipient 4xx replies
	// (greylisting) are not in it.
	Throttled  int
	Failed     int // permanent failures
	Skipped    int // no activity (with the skip policy) or a bad record (lenient mode)
	Suppressed int // unsubscribed customers: not sent, nothing claimed
	// SettledByOthers counts the digests another run held (busy) when
	// this one met them and then decided (sent, held, failed,
	// quarantined) before this run's end: nothing sent by this run.
	SettledByOthers int
	// EndedClaims counts the receipts a crashed run left claimed (or
	// retryable) that this run ended, their customers now suppressed or
	// with nothing to send (counted there too): failed, or held when
	// their send may have started.
	EndedClaims int
	Invalid     int // records that could not be built, in strict mode: the run fails
	Pending     int // retryable, not due or busy at the end of the run
	LostClaims  int // claims taken over by another run before this one finished them
	// LostAfterSend counts the LostClaims this run had sent, or may have
	// sent (an ambiguous send), before the takeover: the other run looks
	// each one up. The rest of LostClaims were not sent by this run.
	LostAfterSend int
	Renewals      int // lease renewals (one ledger call each)

	LookupsFound    int // look-ups that found the message (then reconciled)
	LookupsNotFound int // look-ups that did not (then sent)
	LookupErrors    int // look-ups that could not tell (then left retryable)

	Observed      int                // observe mode: keys observed
	Would         map[string]int     // observe mode: what the ledger would have decided
	Repeats       [numAgeBuckets]int // observe mode: repeated observations by gap
	DuplicateAges [numAgeBuckets]int // enforce mode: duplicates by time since the send
	Interrupted   bool               // stopped by a signal before the end
	Passes        int                // 1 + retry passes
	Duration      time.Duration      // wall time of the run
	ClaimP50      time.Duration      // claim round-trip latency, median
	ClaimP99      time.Duration      // claim round-trip latency, 99th percentile
	LedgerCalls   int                // ledger round trips (calls) made
	// Digests counts the records read from the source by the first pass,
	// bad ones included; Unaccounted says how many of them no other
	// counter accounts for (0 for a run that was not interrupted).
	Digests int
	// SourceRows counts the records read from the source across all
	// passes: a retry pass reads only the customers due again.
	SourceRows int
	// Failures counts failed sends by kind: the class and the mailer's
	// kind, e.g. "temporary: connect" or "fatal: starttls". The first of
	// each kind is logged with its cause.
	Failures map[string]int
	// Stages says, by stage name (StageNames), where the pipeline's
	// goroutines spent the run: working, waiting for input, blocked on
	// output. Where a pipeline waits, and on what, is where it is slow.
	Stages map[string]StageTime
}

// NeedsReview reports whether any row waits for an operator.
func (s *Summary) NeedsReview() bool { return s.Held > 0 || s.Quarantined > 0 }

// Complete reports whether everything the run saw is settled.
func (s *Summary) Complete() bool { return s.Pending == 0 && !s.Interrupted && s.Invalid == 0 }

// Accounted returns how many of the digests the run read end in one of
// the summary's parts: decided by this run (sent, reconciled, duplicate,
// quarantined, held, failed), settled by another run, not claimed
// (skipped, suppressed, invalid, observed), pending at the end (busy,
// not due, retryable), or lost to another run's takeover. Retryable is
// a part of Pending, LostAfterSend of LostClaims: not added again.
func (s *Summary) Accounted() int {
	return s.Sent + s.Reconciled + s.Duplicates + s.Quarantined + s.Held + s.Failed +
		s.SettledByOthers + s.Skipped + s.Suppressed + s.Invalid + s.Observed + s.Pending + s.LostClaims
}

// Unaccounted returns the digests read that no part of the summary
// accounts for: those in flight when a signal stopped the run, or those
// a retry pass re-read whole after the pending list overflowed
// (MaxPendingCustomers). 0 otherwise.
func (s *Summary) Unaccounted() int { return s.Digests - s.Accounted() }

// RepeatAges returns the keys that came again by age bucket, whatever the
// mode: observed repeats plus enforced duplicates.
func (s *Summary) RepeatAges() [numAgeBuckets]int {
	var r [numAgeBuckets]int
	for i := range r {
		r[i] = s.Repeats[i] + s.DuplicateAges[i]
	}
	return r
}

// LogValue implements slog.LogValuer: one line with every counter.
func (s Summary) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.Int("sent", s.Sent), slog.Int("duplicates", s.Duplicates), slog.Int("reconciled", s.Reconciled),
		slog.Int("quarantined", s.Quarantined), slog.Int("held", s.Held), slog.Int("retryable", s.Retryable), slog.Int("retries", s.Retries), slog.Int("throttled", s.Throttled),
		slog.Int("failed", s.Failed), slog.Int("skipped", s.Skipped), slog.Int("suppressed", s.Suppressed), slog.Int("invalid", s.Invalid),
		slog.Int("settled_by_others", s.SettledByOthers),
		slog.Int("pending", s.Pending), slog.Int("lost_claims", s.LostClaims), slog.Int("lost_after_send", s.LostAfterSend),
		slog.Int("renewals", s.Renewals), slog.Int("digests", s.Digests),
		slog.Duration("duration", s.Duration), slog.Duration("claim_p50", s.ClaimP50), slog.Duration("claim_p99", s.ClaimP99),
		slog.Int("ledger_calls", s.LedgerCalls), slog.Int("passes", s.Passes), slog.Int("source_rows", s.SourceRows),
	}
	if len(s.Failures) > 0 {
		attrs = append(attrs, slog.Any("failures", s.Failures))
	}
	if len(s.Stages) > 0 {
		var stages []slog.Attr
		for _, name := range StageNames {
			if t, ok := s.Stages[name]; ok {
				stages = append(stages, slog.Any(name, t))
			}
		}
		attrs = append(attrs, slog.Attr{Key: "stages", Value: slog.GroupValue(stages...)})
	}
	if n := s.LookupsFound + s.LookupsNotFound + s.LookupErrors; n > 0 {
		attrs = append(attrs, slog.Int("lookups_found", s.LookupsFound), slog.Int("lookups_not_found", s.LookupsNotFound), slog.Int("lookup_errors", s.LookupErrors))
	}
	if s.Observed > 0 {
		attrs = append(attrs, slog.Int("observed", s.Observed), slog.Any("would", s.Would))
	}
	if s.Observed > 0 || s.Duplicates > 0 {
		// One name in both modes: a key that came again, by how long after
		// it was observed (observe) or sent (enforce); a cohort run adds
		// both.
		for i, n := range s.RepeatAges() {
			attrs = append(attrs, slog.Int("repeat_"+AgeBucketNames[i], n))
		}
	}
	if s.EndedClaims > 0 {
		attrs = append(attrs, slog.Int("ended_claims", s.EndedClaims))
	}
	if n := s.Unaccounted(); n != 0 {
		attrs = append(attrs, slog.Int("unaccounted", n))
	}
	if s.Interrupted {
		attrs = append(attrs, slog.Bool("interrupted", true))
	}
	return slog.GroupValue(attrs...)
}

// numOutcomes sizes the observe-mode counters, one per digest.Outcome
// (OutcomeFailed is the last; TestNumOutcomesCoversEveryOutcome checks).
const numOutcomes = int(digest.OutcomeFailed) + 1

// counters are the live, concurrently updated form of a Summary.
type counters struct {
	sent, reconciled, duplicates, quarantined, held, retryable, failed atomic.Int64
	retries, throttled                                                 atomic.Int64 // temporary failures recorded (events), of them provider-wide
	skipped, invalid, pending, lost, observed, ledgerCalls, digests    atomic.Int64
	sampled                                                            atomic.Int64 // observe mode: would-be recipients logged
	lookupFound, lookupNotFound, lookupErr, lostAfterSend, renewals    atomic.Int64
	suppressed, sourceRows, settledByOthers, endedClaims               atomic.Int64
	would                                                              [numOutcomes]atomic.Int64 // by digest.Outcome
	repeats, dupAges                                                   [numAgeBuckets]atomic.Int64
}

func (c *counters) snapshot() Summary {
	s := Summary{
		Sent: int(c.sent.Load()), Reconciled: int(c.reconciled.Load()), Duplicates: int(c.duplicates.Load()),
		Quarantined: int(c.quarantined.Load()), Held: int(c.held.Load()), Retryable: int(c.retryable.Load()), Retries: int(c.retries.Load()), Throttled: int(c.throttled.Load()),
		Failed: int(c.failed.Load()), Skipped: int(c.skipped.Load()), Invalid: int(c.invalid.Load()),
		Pending: int(c.pending.Load()), LostClaims: int(c.lost.Load()), Observed: int(c.observed.Load()),
		LedgerCalls: int(c.ledgerCalls.Load()), Digests: int(c.digests.Load()),
		Suppressed: int(c.suppressed.Load()), SourceRows: int(c.sourceRows.Load()), SettledByOthers: int(c.settledByOthers.Load()),
		EndedClaims:   int(c.endedClaims.Load()),
		LostAfterSend: int(c.lostAfterSend.Load()), Renewals: int(c.renewals.Load()),
		LookupsFound: int(c.lookupFound.Load()), LookupsNotFound: int(c.lookupNotFound.Load()), LookupErrors: int(c.lookupErr.Load()),
	}
	for i := range c.repeats {
		s.Repeats[i] = int(c.repeats[i].Load())
		s.DuplicateAges[i] = int(c.dupAges[i].Load())
	}
	if s.Observed > 0 {
		s.Would = map[string]int{}
		for o := range c.would {
			if n := c.would[o].Load(); n > 0 {
				s.Would[digest.Outcome(o).String()] = int(n)
			}
		}
	}
	return s
}
