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
}

// computeStatus accounts for every customer of the week: it reads the
// source as of the week's pin (or, unpinned, as of its cutoff or now if
// earlier), the week's receipts and observed keys, and matches each
// customer's digest to its receipt by key. It reads the week's receipts
// and observed keys into memory once (one map entry per receipt).
func computeStatus(ctx context.Context, store ledger.Store, source digest.Source, q statusQuery) (*weekStatus, ledger.Counts, []digest.PruneTombstone, error) {
	w := q.spec.Week
	ws := &weekStatus{Week: w.String(), Type: q.spec.Type, Version: q.spec.Version, Shard: q.shard.String(), Receipts: map[string]int64{}}
	spec, pin, pinned, err := pinnedSpec(ctx, store, q.spec)
	if err != nil {
		return nil, ledger.Counts{}, nil, err
	}
	ws.WeekEnd, ws.Cutoff = w.End(spec.Location), run.Cutoff(w, spec.Location, q.settle)
	latest := ws.Cutoff
	if q.now.Before(latest) {
		latest = q.now
	}
	asOf, kr := latest, q.keys
	if pinned {
		ws.Pinned, ws.AsOf, ws.Zone = true, &pin.AsOf, spec.Location.String()
		asOf = pin.AsOf
		ws.PartialCutoff, ws.EarlyPin = pin.Partial, run.EarlyPin(pin, w, spec.Location, q.settle)
		if !pin.RepinnedFrom.IsZero() {
			ws.RepinnedFrom = &pin.RepinnedFrom
		}
		if k, ok := q.keys.Pinned(pin.KeyID); ok {
			kr = k
		}
	}
	stones, err := store.Tombstones(ctx, digest.ISOWeek{})
	if err != nil {
		return nil, ledger.Counts{}, nil, err
	}
	ws.pruned(stones)
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
		ws.cutoffOpen = tl.ExcludedRows > 0 || q.now.Before(ws.Cutoff)
	}
	c, err := store.Counts(ctx, w)
	if err != nil {
		return nil, ledger.Counts{}, nil, err
	}
	if !q.shard.All() {
		c.ByState = tl.ReceiptStates // the shard's digests', matched by key
	}
	if err := ws.lastRun(ctx, store, digest.SnapshotPin{Type: q.spec.Type, Week: w, Version: q.spec.Version}); err != nil {
		return nil, ledger.Counts{}, nil, err
	}
	ws.settle(c)
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
func pushWeekState(ctx context.Context, env *Env, st *settings, log *slog.Logger, ws *weekStatus) {
	if st.PushgatewayURL == "" || ws.Shard != "all" {
		return // a shard's status is not the week's
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pushTimeout)
	defer cancel()
	customers := map[string]int64{}
	for o, n := range ws.Customers {
		customers[string(o)] = n
	}
	s := metrics.WeekState{Week: ws.Week, End: ws.WeekEnd, Complete: ws.Verdict == verdictComplete,
		NeedsReview: ws.NeedsReview, Customers: customers, At: env.now()}
	if err := metrics.PushWeekState(ctx, st.PushgatewayURL, nil, s); err != nil {
		log.Error("metrics: week state push failed", "week", ws.Week, "err", err)
	}
}
