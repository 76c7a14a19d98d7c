package weekstatus

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// RecordExpectation records what the run's last complete read of its
// shard found (rd) as the week's expectation for that shard, with the
// receipts of its suppressed and empty customers by state
// (ledger.Expectation's Ghosts), so that Compute can compare it with the
// ledger's counts instead of reading the source. Nothing is recorded when
// the run read no whole shard, or read it as of another cutoff or zone
// than the week's pin, or the pin's key is not in the keyring.
//
// The look-ups before the record get callTimeout each (none when it is
// zero): the pin, and the ghosts a page of a thousand suppressed or empty
// customers at a time, a hundred pages and more in a shard of a
// 10,000,000-customer week, so a database that does not answer fails the
// first of them without a bound on their total. The record itself counts
// the week's receipts under another key id, which reads the week's whole
// partition (seconds at ten million receipts, longer with every shard's
// run doing it at once): it has what is left of ctx, whose deadline the
// caller sets.
func RecordExpectation(ctx context.Context, store ledger.Store, rd *Reader, keys *digest.Keyring, spec digest.Spec, sendEmpty bool, runID string, now time.Time, callTimeout time.Duration) error {
	r, ok := rd.Last()
	if !ok || keys == nil {
		return nil // no whole shard read (interrupted, refused, or a retry of listed customers only)
	}
	pin := digest.SnapshotPin{Type: spec.Type, Week: spec.Week, Version: spec.Version}
	call := func() (context.Context, context.CancelFunc) {
		if callTimeout <= 0 {
			return context.WithCancel(ctx)
		}
		return context.WithTimeout(ctx, callTimeout)
	}
	cctx, cancel := call()
	wp, pinned, err := store.Pinned(cctx, pin)
	cancel()
	if err != nil || !pinned {
		return err // observe mode before any pin: status reads the source
	}
	kr, ok := keys.Pinned(wp.KeyID)
	if wp.KeyID == "" || !ok || !r.AsOf.Equal(wp.AsOf) || (wp.Zone != "" && wp.Zone != r.Zone) {
		return nil
	}
	ghosts, err := ghostStates(ctx, store, spec, kr, r.Others, call)
	if err != nil {
		return err
	}
	return store.RecordExpectation(ctx, pin, ledger.Expectation{Shard: r.Shard.String(), AsOf: wp.AsOf, Zone: r.Zone, KeyID: wp.KeyID,
		SendEmpty: sendEmpty, Send: r.Send, Suppressed: r.Suppress, Empty: r.Empty, NotBuilt: r.NotBuilt, Ghosts: ghosts,
		RunID: runID, RecordedAt: now})
}

// ghostStates counts, by state, the receipts of the week under the
// candidate keys of customers (the pinned key id first, as status matches
// them), a page of keys at a time, each page a call under its own context
// from call.
func ghostStates(ctx context.Context, store ledger.Store, spec digest.Spec, kr *digest.Keyring, customers []string,
	call func() (context.Context, context.CancelFunc)) (map[digest.State]int64, error) {
	out := map[digest.State]int64{}
	const page = 1000
	for chunk := range slices.Chunk(customers, page) {
		cands := make([][]digest.Key, len(chunk))
		var keys []digest.Key
		for i, id := range chunk {
			cands[i] = kr.Candidates(digest.Identity{Customer: id, Week: spec.Week, Type: spec.Type, Version: spec.Version})
			keys = append(keys, cands[i]...)
		}
		cctx, cancel := call()
		states, err := store.WeekStates(cctx, spec.Week, keys)
		cancel()
		if err != nil {
			return nil, err
		}
		for _, cs := range cands {
			for _, k := range cs {
				if s, ok := states[k]; ok {
					out[s]++
					break
				}
			}
		}
	}
	return out, nil
}

// terminal are the states a receipt of a customer no run sends never
// leaves (no run claims it, no review command takes it): recorded ghosts
// in them stay where they were counted.
var terminal = []digest.State{digest.StateSent, digest.StateFailed, digest.StateAcknowledged}

// fastInput is what the fast count compares.
type fastInput struct {
	pin       digest.WeekPin
	zone      string
	shard     digest.Shard
	sendEmpty bool
	ex        ledger.WeekExpectations
	counts    ledger.Counts // the week's receipts by state (every type and version)
}

// fastTally is the fast count's result: what Count would say.
type fastTally struct {
	customers     Counts
	expected      int64
	receiptStates map[digest.State]int64 // the shard's matched receipts; nil for the whole week
}

// fastCount accounts for every customer of the week, or of one shard,
// from the recorded expectations and the ledger's counts, or says why it
// cannot prove the count (then status reads the source). It proves it
// when the expectations of a set of shards that covers the week were
// recorded for the pin as it is (as_of, zone, key id, --send-empty), from
// reads that built every record, left no receipt under another key id,
// and found the receipts of customers that are not sent in terminal
// states only; the week holds no other pin and is not pruned. Then each
// receipt of the week is one Send customer's, except the recorded ghosts,
// and the Send customers without one are S − R: pending, or, with
// observations in the week, not told apart from observed (it refuses).
// One shard's split needs the week settled: every Send customer matched,
// all matched receipts in one state.
func fastCount(in fastInput) (fastTally, string) {
	set, why := expectationSet(in)
	if why != "" {
		return fastTally{}, why
	}
	var send, suppressed, empty int64
	ghosts := map[digest.State]int64{}
	for _, e := range set {
		if e.NotBuilt > 0 {
			return fastTally{}, fmt.Sprintf("shard %s had %d records not built; fix them (see the run's log) and run the shard again", e.Shard, e.NotBuilt)
		}
		if e.OtherKeyIDs > 0 {
			return fastTally{}, fmt.Sprintf("%d receipts of the week are under another key id than the pin's; nothing to do", e.OtherKeyIDs)
		}
		for s, n := range e.Ghosts {
			if n < 0 || n > 0 && !slices.Contains(terminal, s) {
				return fastTally{}, fmt.Sprintf("%d receipts of customers not sent to are %s (shard %s); digest review list shows them", n, s, e.Shard)
			}
			ghosts[s] += n
		}
		send, suppressed, empty = send+e.Send, suppressed+e.Suppressed, empty+e.Empty
	}
	matched := map[digest.State]int64{}
	var receipts int64
	for s, n := range in.counts.ByState {
		m := n - ghosts[s]
		if m < 0 {
			return fastTally{}, fmt.Sprintf("fewer %s receipts (%d) than the runs recorded for customers not sent to (%d); the next run records new reads", s, n, ghosts[s])
		}
		if m > 0 {
			matched[s] = m
		}
		receipts += m
	}
	for s, n := range ghosts {
		if n > 0 && in.counts.ByState[s] < n {
			return fastTally{}, fmt.Sprintf("fewer %s receipts than recorded for customers not sent to", s)
		}
	}
	unmatched := send - receipts
	if unmatched < 0 {
		return fastTally{}, fmt.Sprintf("%d receipts for %d expected digests; the next run records new reads", receipts, send)
	}
	if unmatched > 0 && in.ex.Observed {
		return fastTally{}, "customers without a receipt in a week with observations (observed or pending); a run that sends them settles it"
	}
	t := fastTally{customers: Counts{}, expected: send}
	if !in.shard.All() {
		return shardCount(in.shard, set, matched, unmatched)
	}
	for s, n := range matched {
		t.customers[OfReceipt(&Receipt{State: s}, false, false)] += n
	}
	t.customers[Pending] += unmatched
	t.customers[Suppressed] += suppressed
	t.customers[SkippedEmpty] += empty
	return t, ""
}

// shardCount splits a settled week's count to one shard: every Send
// customer of the week has its receipt, all in one state, so the shard's
// Send customers have theirs in it.
func shardCount(sh digest.Shard, set []ledger.Expectation, matched map[digest.State]int64, unmatched int64) (fastTally, string) {
	if unmatched > 0 || len(matched) > 1 {
		return fastTally{}, "--shard of a week not settled in one state; status without --shard counts from the ledger"
	}
	i := slices.IndexFunc(set, func(e ledger.Expectation) bool { return e.Shard == sh.String() })
	if i < 0 {
		return fastTally{}, "no run recorded its read of shard " + sh.String() + "; a run of that shard does"
	}
	e := set[i]
	t := fastTally{customers: Counts{}, expected: e.Send, receiptStates: map[digest.State]int64{}}
	for s := range matched {
		t.customers[OfReceipt(&Receipt{State: s}, false, false)] += e.Send
		t.receiptStates[s] = e.Send
	}
	if e.Send > 0 && len(matched) == 0 {
		return fastTally{}, "the runs expected digests and the ledger has no receipt; a run sends them"
	}
	t.customers[Suppressed] += e.Suppressed
	t.customers[SkippedEmpty] += e.Empty
	return t, ""
}

// expectationSet returns the recorded expectations of a set of shards that
// covers the week, each recorded for the pin as it is: "all", or every
// shard I/N of one N (N of the queried shard, for one shard), no read of
// another shard layout newer than the set's oldest.
func expectationSet(in fastInput) ([]ledger.Expectation, string) {
	if in.ex.OtherPins > 0 {
		return nil, "the week has another digest type or version: its counts are every version's"
	}
	bySize := map[int][]ledger.Expectation{}
	stale := 0
	for _, e := range in.ex.Rows {
		if !e.AsOf.Equal(in.pin.AsOf) || e.KeyID != in.pin.KeyID || e.Zone != in.zone || e.SendEmpty != in.sendEmpty {
			stale++
			continue
		}
		n := 1
		if e.Shard != "all" {
			var err error
			if _, after, ok := strings.Cut(e.Shard, "/"); ok {
				n, err = strconv.Atoi(after)
			}
			if err != nil || n < 2 {
				continue
			}
		}
		bySize[n] = append(bySize[n], e)
	}
	var best []ledger.Expectation
	for n, rows := range bySize {
		if len(rows) != n || !in.shard.All() && n != in.shard.Count {
			continue
		}
		oldest := rows[0].RecordedAt
		for _, e := range rows {
			if e.RecordedAt.Before(oldest) {
				oldest = e.RecordedAt
			}
		}
		// The set must hold the newest reads: a read of another shard
		// layout recorded after one of the set's saw the source later,
		// perhaps changed.
		newer := slices.ContainsFunc(in.ex.Rows, func(e ledger.Expectation) bool {
			return e.RecordedAt.After(oldest) && !slices.ContainsFunc(rows, func(r ledger.Expectation) bool { return r.Shard == e.Shard })
		})
		if !newer {
			best = rows
		}
	}
	if best == nil {
		if stale > 0 {
			return nil, "the runs' recorded reads are of another cutoff, key, zone or --send-empty than the pin (a repin or a new keyring); the next run records new ones"
		}
		return nil, "the newest shard layout has shards no run recorded; run them, or the whole week once"
	}
	return best, ""
}
