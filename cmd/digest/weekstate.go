package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/metrics"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/weekstatus"
)

// statusQuery is what "digest status" (and the week-state push after a
// run) computes a week's status for.
type statusQuery struct {
	spec      digest.Spec // week, type, version; the zone unless the week is pinned to one
	settle    time.Duration
	shard     digest.Shard
	sendEmpty bool
	keys      *digest.Keyring
	now       time.Time
	full      bool // read every customer from the source (status --customers)
}

// computeStatus accounts for every customer of the week. Unless q.full,
// it first compares what the runs recorded of their reads of the source
// (ledger.Expectation) with the ledger's counts (fastCount): a few small
// queries whatever the size of the week. Where that cannot prove the
// count, and with q.full, it reads the source as of the week's pin (or,
// unpinned, as of its cutoff or now if earlier), the week's receipts and
// observed keys, and matches each customer's digest to its receipt by key
// (one map entry per receipt).
func computeStatus(ctx context.Context, store ledger.Store, source digest.Source, q statusQuery) (*weekstatus.Report, ledger.Counts, []digest.PruneTombstone, error) {
	w := q.spec.Week
	ws := &weekstatus.Report{Week: w.String(), Type: q.spec.Type, Version: q.spec.Version, Shard: q.shard.String(), Receipts: map[string]int64{}}
	spec, pin, pinned, err := pinnedSpec(ctx, store, q.spec)
	if err != nil {
		return nil, ledger.Counts{}, nil, err
	}
	ws.WeekEnd, ws.Cutoff = w.End(spec.Location), run.Cutoff(w, spec.Location, q.settle)
	latest := ws.Cutoff
	if q.now.Before(latest) {
		latest = q.now
	}
	asOf, kr, keyPinned := latest, q.keys, false
	if pinned {
		ws.Pinned, ws.AsOf, ws.Zone = true, &pin.AsOf, spec.Location.String()
		asOf = pin.AsOf
		ws.PartialCutoff, ws.EarlyPin = pin.Partial, run.EarlyPin(pin, w, spec.Location, q.settle)
		if !pin.RepinnedFrom.IsZero() {
			ws.RepinnedFrom = &pin.RepinnedFrom
		}
		if k, ok := q.keys.Pinned(pin.KeyID); ok {
			kr, keyPinned = k, pin.KeyID != ""
		}
	}
	stones, err := store.Tombstones(ctx, digest.ISOWeek{})
	if err != nil {
		return nil, ledger.Counts{}, nil, err
	}
	ws.MarkPruned(stones)
	c, err := store.Counts(ctx, w)
	if err != nil {
		return nil, ledger.Counts{}, nil, err
	}
	if err := lastRun(ctx, ws, store, digest.SnapshotPin{Type: q.spec.Type, Week: w, Version: q.spec.Version}); err != nil {
		return nil, ledger.Counts{}, nil, err
	}
	why := "--customers: every customer read from the source"
	if !q.full {
		why = "the week is not pinned"
		switch {
		case !pinned:
		case !keyPinned:
			why = "the pin's key is not in the keyring (or the pin has no key id)"
		case ws.PartialCutoff || ws.EarlyPin || latest.After(asOf):
			why = "the cutoff is partial or early: what it excluded is read from the source"
		case ws.Pruned:
			why = "the week was pruned"
		default:
			ex, err := store.Expectations(ctx, digest.SnapshotPin{Type: q.spec.Type, Week: w, Version: q.spec.Version})
			if err != nil {
				return nil, ledger.Counts{}, nil, err
			}
			var ft fastTally
			ft, why = fastCount(fastInput{pin: pin, zone: spec.Location.String(), shard: q.shard, sendEmpty: q.sendEmpty, ex: ex, counts: c})
			if why == "" {
				ws.CountedFrom = weekstatus.CountedFromLedger
				ws.Customers = weekstatus.Counts{}
				for _, o := range weekstatus.Outcomes {
					ws.Customers[o] = ft.customers[o]
				}
				ws.Expected = &ft.expected
				if !q.shard.All() {
					c.ByState = ft.receiptStates
				}
				settleStatus(ws, c)
				return ws, c, stones, nil
			}
		}
	}
	ws.CountedFrom, ws.SourceReason = weekstatus.CountedFromSource, why
	receipts, err := weekReceipts(ctx, store, w)
	if err != nil {
		return nil, ledger.Counts{}, nil, err
	}
	observed, err := store.ObservedKeys(ctx, w)
	if err != nil {
		return nil, ledger.Counts{}, nil, err
	}
	tl, err := weekstatus.Count(ctx, weekstatus.Input{Source: source, Spec: spec, AsOf: asOf, Latest: latest, Shard: q.shard,
		SendEmpty: q.sendEmpty, Keys: kr.Candidates, Receipts: receipts, Observed: observed, Pruned: ws.Pruned})
	if err != nil {
		return nil, ledger.Counts{}, nil, err
	}
	ws.Customers = weekstatus.Counts{}
	for _, o := range weekstatus.Outcomes {
		ws.Customers[o] = tl.Customers[o]
	}
	ws.NotBuilt = tl.Customers[weekstatus.SkippedNotBuilt]
	if pinned {
		n := tl.Expected
		ws.Expected = &n
	}
	if ws.PartialCutoff || ws.EarlyPin {
		ws.ExcludedRows, ws.ExcludedCustomers = &tl.ExcludedRows, &tl.ExcludedCustomers
		ws.CutoffOpen = tl.ExcludedRows > 0 || q.now.Before(ws.Cutoff)
	}
	if !q.shard.All() {
		c.ByState = tl.ReceiptStates // the shard's digests', matched by key
	}
	settleStatus(ws, c)
	return ws, c, stones, nil
}

// weekReceipts reads the week's receipts once, in key order.
func weekReceipts(ctx context.Context, store ledger.Store, w digest.ISOWeek) (map[digest.Key]weekstatus.Receipt, error) {
	out := map[digest.Key]weekstatus.Receipt{}
	f := ledger.ListFilter{Week: w, Limit: 1000}
	for {
		page, err := store.List(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, r := range page {
			out[r.Key] = weekstatus.Receipt{State: r.State}
		}
		if len(page) < f.PageSize() {
			return out, nil
		}
		f.After = page[len(page)-1].Key
	}
}

// pushWeekState pushes ws as the week's state (metrics.PushWeekState) when
// DIGEST_PUSHGATEWAY_URL is set. A failure is logged; it never changes the
// command's exit code.
func pushWeekState(ctx context.Context, env *Env, url string, log *slog.Logger, ws *weekstatus.Report) {
	if url == "" || ws.Shard != "all" {
		return // a shard's status is not the week's
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pushTimeout)
	defer cancel()
	if err := metrics.PushWeekState(ctx, url, nil, weekStateOf(ws, env.now())); err != nil {
		log.Error("metrics: week state push failed", "week", ws.Week, "err", err)
	}
}

// weekStateOf is ws as the week-state metric carries it.
func weekStateOf(ws *weekstatus.Report, at time.Time) metrics.WeekState {
	customers := map[string]int64{}
	for o, n := range ws.Customers {
		customers[string(o)] = n
	}
	return metrics.WeekState{Week: ws.Week, End: ws.WeekEnd, Complete: ws.Verdict == verdictComplete,
		NeedsReview: ws.NeedsReview, Customers: customers, At: at}
}

// pushWeekOf computes the week's whole status (every shard) and pushes it,
// when DIGEST_PUSHGATEWAY_URL is set: after every run of the week, so
// that the week's state is current whatever the run's exit code said.
//
// "digest schedule" serves its metrics instead of pushing: its runs put
// the week's state among the metrics it serves (labelled by week), so
// that the alerts on digest_week_* see its weeks as they see pushed ones.
func pushWeekOf(ctx context.Context, env *Env, url string, log *slog.Logger, store ledger.Store, source digest.Source, q statusQuery) {
	reg, scheduled := ctx.Value(scheduleMetricsKey{}).(*metrics.Registry)
	if !scheduled && url == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*pushTimeout)
	defer cancel()
	q.shard, q.now = digest.Shard{}, env.now()
	ws, _, _, err := computeStatus(ctx, store, source, q)
	if err != nil {
		log.Error("metrics: week state not pushed: the week's status failed", "week", q.spec.Week.String(), "err", err)
		return
	}
	if scheduled {
		reg.ObserveWeekState(weekStateOf(ws, env.now()))
		return
	}
	pushWeekState(ctx, env, url, log, ws)
}

// pushReviewedWeek pushes the state of week w after a review command
// changed its receipts. The state needs the source (every customer is
// counted): with DIGEST_DATABASE_URL, the PostgreSQL relations. Without
// one (an embedded ledger and a snapshot file) nothing is pushed, rather
// than a state that could not say whether the week is complete; the log
// says to run "digest status --snapshot FILE" with
// DIGEST_PUSHGATEWAY_URL instead.
func pushReviewedWeek(ctx context.Context, env *Env, wp weekPush, store *ledgerDB, w digest.ISOWeek) {
	if wp.url == "" {
		return
	}
	log := newLogger(env, wp.level)
	if wp.ledger.DatabaseURL == "" {
		log.Warn("metrics: week state not pushed: no source to count the week's customers; push it with: digest status --week "+w.String()+" --snapshot FILE", "week", w.String())
		return
	}
	fail := func(err error) { log.Error("metrics: week state not pushed", "week", w.String(), "err", err) }
	if wp.err != nil {
		fail(wp.err)
		return
	}
	keys, err := loadKeyring(wp.keys, wp.ledger, log)
	if err != nil {
		fail(err)
		return
	}
	source, closeSource, err := openSource(ctx, wp.ledger, "", store, log)
	if err != nil {
		fail(err)
		return
	}
	defer closeSource()
	spec := digest.Spec{Week: w, Location: wp.zone, Type: wp.typ, Version: wp.version}
	pushWeekOf(ctx, env, wp.url, log, store, source, statusQuery{spec: spec, settle: wp.settle, keys: keys})
}

// weekPush is what a command that changes receipts needs to push their
// week's state afterwards (pushReviewedWeek).
type weekPush struct {
	url          string // DIGEST_PUSHGATEWAY_URL; "": no push
	level        slog.Level
	ledger       ledgerConfig
	keys         keyConfig
	zone         *time.Location
	settle       time.Duration
	typ, version string
	err          error // DIGEST_TZ or DIGEST_SETTLE unparsable: the push fails (logged), not the command
}

// weekPush reads the settings of pushReviewedWeek. They are read only when
// a push is due (DIGEST_PUSHGATEWAY_URL and a PostgreSQL source), and a
// zone or settle that does not parse fails the push, not the command.
func (s *settings) weekPush() weekPush {
	wp := weekPush{url: s.get("DIGEST_PUSHGATEWAY_URL"), level: s.logLevel(), ledger: s.ledger()}
	if wp.url == "" || wp.ledger.DatabaseURL == "" {
		return wp
	}
	if wp.zone, wp.err = s.location(); wp.err != nil {
		return wp
	}
	if wp.settle, wp.err = s.duration("DIGEST_SETTLE"); wp.err != nil {
		return wp
	}
	wp.keys, wp.typ, wp.version = s.hmacKeys(), s.get("DIGEST_TYPE"), s.get("DIGEST_VERSION")
	return wp
}

// pushReviewedKey pushes the state of the week of key's receipt; see
// pushReviewedWeek.
func pushReviewedKey(ctx context.Context, env *Env, wp weekPush, store *ledgerDB, key digest.Key) {
	if wp.url == "" {
		return
	}
	r, _, err := store.Show(ctx, key)
	if err != nil {
		newLogger(env, wp.level).Error("metrics: week state not pushed", "key", string(key), "err", err)
		return
	}
	if w, err := digest.ParseISOWeek(r.Week); err == nil {
		pushReviewedWeek(ctx, env, wp, store, w)
	}
}
