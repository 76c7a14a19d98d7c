// Package weekstatus accounts for every customer of a week: what became
// of each one's digest (sent, suppressed, skipped and why, observed but not
// sent, pending, in flight, held, quarantined, failed), and whether the
// week is complete, that is, whether every customer's outcome is decided.
// "digest status" prints it and the week-state metric pushes it.
package weekstatus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/run"
)

// Outcome is what became of one customer's digest of the week.
type Outcome string

// Outcomes. The names are the "outcome" label of digest_week_customers and
// the keys of status --json's "customers": stable.
const (
	Sent            Outcome = "sent"              // a sent receipt (or found at the provider)
	Failed          Outcome = "failed"            // a permanent failure, recorded
	Pruned          Outcome = "pruned"            // its receipt was pruned: settled before prune
	Suppressed      Outcome = "suppressed"        // unsubscribed: nothing to send
	SkippedEmpty    Outcome = "skipped_empty"     // no activity as of the cutoff, and empty digests are not sent
	SkippedNotBuilt Outcome = "skipped_not_built" // a bad source record (strict runs fail on it, lenient ones skip it)
	ObservedNotSent Outcome = "observed_not_sent" // seen by an observe run or a cohort's observed rest, never claimed
	Pending         Outcome = "pending"           // no receipt, and no run met it
	InFlight        Outcome = "claimed_retryable" // claimed or retryable: a run holds it or will retry it
	Held            Outcome = "held"              // needs review: maybe sent, nothing could tell
	Quarantined     Outcome = "quarantined"       // needs review: its content changed
	Acknowledged    Outcome = "acknowledged"      // an operator closed it (review acknowledge): never sent again
	// Excluded: no activity as of the week's pin, but activity recorded
	// after it: an early or partial cutoff left the customer out.
	Excluded Outcome = "excluded_by_cutoff"
)

// Outcomes lists every outcome, in the order status prints them.
var Outcomes = []Outcome{Sent, Failed, Acknowledged, Pruned, Suppressed, SkippedEmpty, SkippedNotBuilt,
	ObservedNotSent, Pending, InFlight, Held, Quarantined, Excluded}

// Decided reports whether o settles the customer for the week: nothing is
// left to send or to decide.
func (o Outcome) Decided() bool {
	switch o {
	case Sent, Failed, Acknowledged, Pruned, Suppressed, SkippedEmpty, SkippedNotBuilt:
		return true
	}
	return false
}

// NeedsReview reports whether o waits for an operator's decision.
func (o Outcome) NeedsReview() bool { return o == Held || o == Quarantined }

// Counts counts customers by outcome.
type Counts map[Outcome]int64

// Undecided counts the customers whose digest is neither settled nor
// waiting for review: what a run still has to send.
func (c Counts) Undecided() int64 {
	var n int64
	for o, k := range c {
		if !o.Decided() && !o.NeedsReview() {
			n += k
		}
	}
	return n
}

// NeedsReview counts the customers whose digest waits for a decision.
func (c Counts) NeedsReview() int64 { return c[Held] + c[Quarantined] }

// Total counts every customer.
func (c Counts) Total() int64 {
	var n int64
	for _, k := range c {
		n += k
	}
	return n
}

// Receipt is what status knows of one key's receipt.
type Receipt struct {
	State digest.State
}

// OfReceipt returns the outcome of a digest a run would send, from its
// receipt (nil: none), whether an observe run saw its key, and whether the
// week was pruned (a missing receipt was then settled and pruned).
func OfReceipt(r *Receipt, observed, pruned bool) Outcome {
	if r == nil {
		switch {
		case pruned:
			return Pruned
		case observed:
			return ObservedNotSent
		}
		return Pending
	}
	switch r.State {
	case digest.StateSent:
		return Sent
	case digest.StateFailed:
		return Failed
	case digest.StateHeld:
		return Held
	case digest.StateQuarantined:
		return Quarantined
	case digest.StateAcknowledged:
		return Acknowledged
	}
	return InFlight // claimed or retryable
}

// Input is what Tally reads.
type Input struct {
	Source    digest.Source
	Spec      digest.Spec
	AsOf      time.Time // the week's pin, or what a run would read as of
	Latest    time.Time // what the source holds now: min(now, cutoff); after AsOf for an early cutoff
	Shard     digest.Shard
	SendEmpty bool
	// Keys returns the candidate keys of a digest (the keyring pinned
	// with the week, its key id first).
	Keys   func(digest.Identity) []digest.Key
	Ledger WeekLookup // the week's receipts and observed keys, asked a page at a time
	Pruned bool       // the week was pruned
	// Suppressions, with Keyring, is the ledger's suppression list: a
	// digest without a receipt whose customer or address is on it is
	// suppressed (a run never claims it), not pending. Nil: not asked.
	Suppressions digest.SuppressionList
	Keyring      *digest.Keyring
	// OtherVersions are the other content versions of Spec.Type pinned
	// for the week: each digest's receipts under them are looked up too,
	// to count the customers sent the week under more than one version
	// (Tally.MoreThanOneVersion).
	OtherVersions []string
}

// WeekLookup is what Count asks the ledger (ledger.Store has both) of
// each page of digests it reads, so that it holds a page, never the week:
// the states of their receipts, and which of their keys observe runs saw.
type WeekLookup interface {
	// WeekStates returns the state of each of keys that is a receipt of
	// week.
	WeekStates(ctx context.Context, week digest.ISOWeek, keys []digest.Key) (map[digest.Key]digest.State, error)
	// ObservedKeys returns those of keys observed in week.
	ObservedKeys(ctx context.Context, week digest.ISOWeek, keys []digest.Key) (map[digest.Key]bool, error)
}

// countPage is how many digests Count looks up in the ledger at once.
const countPage = 1000

// Tally is the week's customers by outcome, and what the cutoff left out.
type Tally struct {
	Customers Counts
	// Expected are the digests a run would send (run.VerdictOf's Send).
	Expected int64
	// ExcludedRows and ExcludedCustomers count the week's activity rows
	// recorded after AsOf and by Latest, and their customers: what an
	// early cutoff left out of the digests. Zero when AsOf is not before
	// Latest.
	ExcludedRows, ExcludedCustomers int64
	// ReceiptStates counts the receipts of the digests counted (those
	// matched to a customer of the shard) by state.
	ReceiptStates map[digest.State]int64
	// MoreThanOneVersion counts the customers with a sent receipt of the
	// week under more than one of Spec.Version and Input.OtherVersions:
	// sent the week more than once, as a new version.
	MoreThanOneVersion int64
}

// Count reads the source as of in.AsOf (and, when in.Latest is later,
// also as of in.Latest, to see what the cutoff excluded) and gives each
// customer of the shard an outcome.
func Count(ctx context.Context, in Input) (Tally, error) {
	t := Tally{Customers: Counts{}, ReceiptStates: map[digest.State]int64{}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var later *laterRead // the source as of Latest, read beside the read as of AsOf
	if in.Latest.After(in.AsOf) {
		later = readLater(ctx, in)
		defer later.stop()
	}
	st := startSettling(ctx, cancel, in)
	defer st.wait()
	page := make([]pageDigest, 0, countPage)
	q := digest.SourceQuery{Week: in.Spec.Week, Location: in.Spec.Location, AsOf: in.AsOf, Shard: in.Shard}
	for rec, err := range in.Source.Records(ctx, q) {
		var bad *digest.BadRecordError
		if errors.As(err, &bad) {
			t.Customers[SkippedNotBuilt]++
			continue
		}
		if err != nil {
			if serr := st.wait(); serr != nil {
				return Tally{}, serr // what stopped the read
			}
			return Tally{}, fmt.Errorf("read source: %w", err)
		}
		laterRows := 0 // the customer's activity rows as of Latest
		if later != nil && in.Shard.Has(rec.Customer.ID) {
			if laterRows, err = later.rows(rec.Customer.ID); err != nil {
				if serr := st.wait(); serr != nil {
					return Tally{}, serr // what stopped the read
				}
				return Tally{}, err
			}
			if n := laterRows - len(rec.Activity); n > 0 {
				t.ExcludedRows += int64(n)
				t.ExcludedCustomers++
			}
		}
		d, v, _ := run.VerdictOf(rec, in.Spec, in.Shard, in.SendEmpty)
		switch v {
		case run.VerdictOtherShard:
		case run.VerdictSuppressed:
			t.Customers[Suppressed]++
		case run.VerdictInvalid:
			t.Customers[SkippedNotBuilt]++
		case run.VerdictEmpty:
			if laterRows > 0 {
				t.Customers[Excluded]++
			} else {
				t.Customers[SkippedEmpty]++
			}
		case run.VerdictSend:
			t.Expected++
			if page = append(page, pageDigest{d.Identity, d.Customer.Email}); len(page) == countPage {
				st.pages <- page
				page = make([]pageDigest, 0, countPage)
			}
		}
	}
	st.pages <- page
	if err := st.wait(); err != nil {
		return Tally{}, err
	}
	if err := ctx.Err(); err != nil {
		return Tally{}, err
	}
	for o, n := range st.customers {
		t.Customers[o] += n
	}
	t.Expected -= st.listed
	t.ReceiptStates = st.states
	t.MoreThanOneVersion = st.multi
	return t, nil
}

// laterRead is the source read as of in.Latest, read beside the read as
// of in.AsOf, at most a page ahead of it. Both read the same customers in
// the same order (digest.Source yields them in customer id order, whatever
// the cutoff), so Count holds a page of the later read instead of a map of
// the week's customers (the map it held for an early or partial pin grew
// by a customer with activity: 114 MiB at 1,000,000, docs/benchmarks.md).
// The order is the source's own (a PostgreSQL source's collation may not
// be Go's string order): rows finds a customer by equality alone, and
// keeps what it passes on the way in case it is asked for later, so an
// order it does not expect costs memory, never a wrong count.
type laterRead struct {
	recs   chan laterRecord // a page of the later read, ahead of the earlier one
	stop   func()           // ends the read and waits for it
	shard  digest.Shard
	asOf   time.Time
	passed map[string]int // activity rows of the customers passed and not yet asked for
}

// laterRecord is what Count needs of a record of the later read.
type laterRecord struct {
	id   string
	rows int
	bad  bool  // a record the source could not read
	err  error // the read failed
}

// readLater starts the read as of in.Latest in a goroutine of its own, so
// that its pages are fetched while Count works through the earlier read's.
func readLater(ctx context.Context, in Input) *laterRead {
	ctx, cancel := context.WithCancel(ctx)
	recs := make(chan laterRecord, countPage)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(recs)
		q := digest.SourceQuery{Week: in.Spec.Week, Location: in.Spec.Location, AsOf: in.Latest, Shard: in.Shard}
		for rec, err := range in.Source.Records(ctx, q) {
			var lr laterRecord
			var bad *digest.BadRecordError
			switch {
			case errors.As(err, &bad):
				lr.bad = true
			case err != nil:
				lr.err = err
			default:
				lr.id, lr.rows = rec.Customer.ID, len(rec.Activity)
			}
			select {
			case recs <- lr:
			case <-ctx.Done():
				return
			}
			if lr.err != nil {
				return
			}
		}
	}()
	stop := func() {
		cancel()
		<-done
	}
	return &laterRead{recs: recs, stop: stop, shard: in.Shard, asOf: in.Latest, passed: map[string]int{}}
}

// rows returns how many activity rows customer id has as of Latest: 0
// when the later read does not have it, or has it as a bad record. It
// reads on until it meets id, keeping the activity of the customers it
// passes (those the read as of AsOf had as bad records, usually none).
func (l *laterRead) rows(id string) (int, error) {
	if n, ok := l.passed[id]; ok {
		delete(l.passed, id)
		return n, nil
	}
	for lr := range l.recs {
		switch {
		case lr.bad:
			continue
		case lr.err != nil:
			return 0, fmt.Errorf("read source as of %s: %w", l.asOf.Format(time.RFC3339), lr.err)
		case lr.id == id:
			return lr.rows, nil
		}
		if lr.rows > 0 && l.shard.Has(lr.id) {
			l.passed[lr.id] = lr.rows
		}
	}
	return 0, nil
}

// settling looks up the pages of digests Count hands it in the ledger,
// one at a time, while Count reads the next page from the source: two
// pages held at most. A failed look-up cancels Count's read.
type settling struct {
	in        Input
	pages     chan []pageDigest
	done      chan struct{}
	closed    bool
	err       error
	customers Counts
	states    map[digest.State]int64
	listed    int64 // digests without a receipt on the suppression list
	multi     int64 // customers sent the week under more than one version
}

// pageDigest is what settle needs of a digest a run would send.
type pageDigest struct {
	id    digest.Identity
	email string
}

func startSettling(ctx context.Context, cancel context.CancelFunc, in Input) *settling {
	st := &settling{in: in, pages: make(chan []pageDigest, 1), done: make(chan struct{}),
		customers: Counts{}, states: map[digest.State]int64{}}
	go func() {
		defer close(st.done)
		for page := range st.pages { // drained to the end, so a send never blocks for good
			if st.err != nil {
				continue
			}
			if st.err = st.settle(ctx, page); st.err != nil {
				cancel()
			}
		}
	}()
	return st
}

// wait ends the pages and returns the first look-up's error, once the
// look-ups handed over are done.
func (st *settling) wait() error {
	if !st.closed {
		st.closed = true
		close(st.pages)
	}
	<-st.done
	return st.err
}

// settle looks up a page of digests a run would send and counts each
// one's outcome: its receipt under any candidate key (the pinned key id
// first), or, for a digest without one, whether any candidate was
// observed, or whether its customer or address is on the suppression list.
// One ledger call, and two more only for the digests without a receipt:
// none once the week's runs are done.
func (st *settling) settle(ctx context.Context, page []pageDigest) error {
	if len(page) == 0 {
		return nil
	}
	in := st.in
	cands := make([][]digest.Key, len(page))
	others := make([][][]digest.Key, len(page)) // by digest, by other version
	var keys []digest.Key
	for i, d := range page {
		cands[i] = in.Keys(d.id)
		keys = append(keys, cands[i]...)
		for _, v := range in.OtherVersions {
			id := d.id
			id.Version = v
			ks := in.Keys(id)
			others[i] = append(others[i], ks)
			keys = append(keys, ks...)
		}
	}
	states, err := in.Ledger.WeekStates(ctx, in.Spec.Week, keys)
	if err != nil {
		return fmt.Errorf("read the week's receipts: %w", err)
	}
	for i, ks := range cands {
		sent := 0
		for _, vs := range append([][]digest.Key{ks}, others[i]...) {
			if s, ok := receiptOf(states, vs); ok && s == digest.StateSent {
				sent++
			}
		}
		if sent > 1 {
			st.multi++
		}
	}
	var (
		unsent [][]digest.Key // the candidates of the digests without a receipt
		ask    []digest.Key   // their keys not on the suppression list, for one look-up
		none   []pageDigest   // those digests
	)
	for i, ks := range cands {
		if s, ok := receiptOf(states, ks); ok {
			st.customers[OfReceipt(&Receipt{State: s}, false, in.Pruned)]++
			st.states[s]++
			continue
		}
		unsent = append(unsent, ks)
		none = append(none, page[i])
	}
	if len(unsent) == 0 {
		return nil
	}
	unsent, ask, err = st.unlisted(ctx, none, unsent)
	if err != nil || len(unsent) == 0 {
		return err
	}
	observed, err := in.Ledger.ObservedKeys(ctx, in.Spec.Week, ask)
	if err != nil {
		return fmt.Errorf("read the week's observed keys: %w", err)
	}
	for _, ks := range unsent {
		seen := slices.ContainsFunc(ks, func(k digest.Key) bool { return observed[k] })
		st.customers[OfReceipt(nil, seen, in.Pruned)]++
	}
	return nil
}

// unlisted counts as suppressed the digests of page (none with a
// receipt, cands their candidate keys) whose customer or address is on
// the ledger's suppression list, under any secret of the keyring as a run
// looks them up, and returns the candidates of the rest, and all their
// keys.
func (st *settling) unlisted(ctx context.Context, page []pageDigest, cands [][]digest.Key) ([][]digest.Key, []digest.Key, error) {
	in := st.in
	var ask []digest.Key
	if in.Suppressions == nil || in.Keyring == nil {
		for _, ks := range cands {
			ask = append(ask, ks...)
		}
		return cands, ask, nil
	}
	var sk []digest.SuppressionKey
	for _, d := range page {
		sk = append(sk, in.Keyring.CustomerKeys(d.id.Customer)...)
		sk = append(sk, in.Keyring.AddressKeys(d.email)...)
	}
	found, err := in.Suppressions.Suppressed(ctx, sk)
	if err != nil {
		return nil, nil, fmt.Errorf("read the suppression list: %w", err)
	}
	kept := cands[:0]
	for i, d := range page {
		listed := func(k digest.SuppressionKey) bool { return found[k] }
		if slices.ContainsFunc(in.Keyring.CustomerKeys(d.id.Customer), listed) || slices.ContainsFunc(in.Keyring.AddressKeys(d.email), listed) {
			st.customers[Suppressed]++
			st.listed++
			continue
		}
		kept = append(kept, cands[i])
		ask = append(ask, cands[i]...)
	}
	return kept, ask, nil
}

// receiptOf is the state of the receipt under the first of candidate keys
// ks that has one.
func receiptOf(states map[digest.Key]digest.State, ks []digest.Key) (digest.State, bool) {
	for _, k := range ks {
		if s, ok := states[k]; ok {
			return s, true
		}
	}
	return "", false
}

// Verdicts of a week, status --json's "verdict": stable.
const (
	VerdictComplete  = "complete"
	VerdictRemaining = "remaining"
	VerdictReview    = "needs_review"
	VerdictNotRun    = "not_run_yet"
	// VerdictPartial: the week's pin cut it off before its end plus the
	// settle time (--early-cutoff, or an older version's early pin) and
	// activity recorded since is not in its digests, or may still come.
	VerdictPartial = "partial_cutoff"
)

// Week is what the verdict is decided on.
type Week struct {
	Pinned bool // a run that may send pinned the week
	// ReceiptsNeedReview counts the week's held and quarantined receipts
	// (of any type and version: "digest review list --week" lists them).
	ReceiptsNeedReview int64
	Customers          Counts
	// CutoffOpen: the pin is partial or early, and it left activity out
	// (or the week's cutoff is still ahead, so it may yet).
	CutoffOpen bool
}

// Verdict is complete only when every customer's outcome is decided and
// nothing waits for review; a review outranks the rest, as in "digest run".
func (w Week) Verdict() string {
	switch {
	case w.ReceiptsNeedReview > 0 || w.Customers.NeedsReview() > 0:
		return VerdictReview
	case !w.Pinned:
		return VerdictNotRun
	case w.CutoffOpen:
		return VerdictPartial
	case w.Customers.Undecided() > 0:
		return VerdictRemaining
	}
	return VerdictComplete
}
