package weekstatus

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/run"
)

// Query is what Compute computes a week's status for: "digest status"'s
// week and flags, or the week a run just sent.
type Query struct {
	Spec      digest.Spec // week, type, version; the zone unless the week is pinned to one
	Settle    time.Duration
	Shard     digest.Shard
	SendEmpty bool
	Keys      *digest.Keyring
	Now       time.Time
	Full      bool // read every customer from the source (status --customers)
}

// Compute accounts for every customer of the week. Unless q.Full,
// it first compares what the runs recorded of their reads of the source
// (ledger.Expectation) with the ledger's counts (fastCount): a few small
// queries whatever the size of the week. Where that cannot prove the
// count, and with q.Full, it reads the source as of the week's pin (or,
// unpinned, as of its cutoff or now if earlier) and looks up each page of
// customers' digests in the ledger by key (Count): their receipts and
// observed keys, a page held at a time. The Report is settled (Report.Settle)
// but for its ExitCode, which is the binary's to set.
func Compute(ctx context.Context, store ledger.Store, source digest.Source, q Query) (*Report, ledger.Counts, []digest.PruneTombstone, error) {
	w := q.Spec.Week
	ws := &Report{Week: w.String(), Type: q.Spec.Type, Version: q.Spec.Version, Shard: q.Shard.String(), Receipts: map[string]int64{}}
	spec, pin, pinned, err := PinnedSpec(ctx, store, q.Spec)
	if err != nil {
		return nil, ledger.Counts{}, nil, err
	}
	ws.WeekEnd, ws.Cutoff = w.End(spec.Location), run.Cutoff(w, spec.Location, q.Settle)
	latest := ws.Cutoff
	if q.Now.Before(latest) {
		latest = q.Now
	}
	asOf, kr, keyPinned := latest, q.Keys, false
	if pinned {
		ws.Pinned, ws.AsOf, ws.Zone = true, &pin.AsOf, spec.Location.String()
		ws.ResentAsNewVersion = pin.ResentAsNewVersion
		asOf = pin.AsOf
		ws.PartialCutoff, ws.EarlyPin = pin.Partial, run.EarlyPin(pin, w, spec.Location, q.Settle)
		if !pin.RepinnedFrom.IsZero() {
			ws.RepinnedFrom = &pin.RepinnedFrom
		}
		if k, ok := q.Keys.Pinned(pin.KeyID); ok {
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
	if err := lastRun(ctx, ws, store, digest.SnapshotPin{Type: q.Spec.Type, Week: w, Version: q.Spec.Version}); err != nil {
		return nil, ledger.Counts{}, nil, err
	}
	if ws.OtherVersions, err = otherVersions(ctx, store, q.Spec); err != nil {
		return nil, ledger.Counts{}, nil, err
	}
	why := "--customers asks for it"
	if !q.Full {
		why = "the week is not pinned yet; its first run pins it"
		switch {
		case !pinned:
		case len(ws.OtherVersions) > 0:
			why = "the week was also run under another version: each customer is matched under every version"
		case !keyPinned:
			why = "the keyring lacks the pin's key id (or the pin has none); nothing to do, the count is exact"
		case ws.PartialCutoff || ws.EarlyPin || latest.After(asOf):
			why = "the cutoff is partial or early; digest repin moves it to the week's cutoff"
		case ws.Pruned:
			why = "the week was pruned; nothing to do"
		default:
			ex, err := store.Expectations(ctx, digest.SnapshotPin{Type: q.Spec.Type, Week: w, Version: q.Spec.Version})
			if err != nil {
				return nil, ledger.Counts{}, nil, err
			}
			var ft fastTally
			ft, why = fastCount(fastInput{pin: pin, zone: spec.Location.String(), shard: q.Shard, sendEmpty: q.SendEmpty, ex: ex, counts: c})
			if why == "" {
				ws.CountedFrom = CountedFromLedger
				ws.Customers = Counts{}
				for _, o := range Outcomes {
					ws.Customers[o] = ft.customers[o]
				}
				ws.Expected = &ft.expected
				if !q.Shard.All() {
					c.ByState = ft.receiptStates
				}
				ws.Settle(c, ReceiptStates)
				return ws, c, stones, nil
			}
		}
	}
	ws.CountedFrom, ws.SourceReason = CountedFromSource, why
	tl, err := Count(ctx, Input{Source: source, Spec: spec, AsOf: asOf, Latest: latest, Shard: q.Shard,
		SendEmpty: q.SendEmpty, Keys: kr.Candidates, Ledger: store, Pruned: ws.Pruned, Suppressions: store, Keyring: q.Keys,
		OtherVersions: ws.OtherVersions})
	if err != nil {
		return nil, ledger.Counts{}, nil, err
	}
	ws.Customers = Counts{}
	for _, o := range Outcomes {
		ws.Customers[o] = tl.Customers[o]
	}
	ws.NotBuilt = tl.Customers[SkippedNotBuilt]
	if pinned {
		n := tl.Expected
		ws.Expected = &n
	}
	if ws.PartialCutoff || ws.EarlyPin {
		ws.ExcludedRows, ws.ExcludedCustomers = &tl.ExcludedRows, &tl.ExcludedCustomers
		ws.CutoffOpen = tl.ExcludedRows > 0 || q.Now.Before(ws.Cutoff)
	}
	if !q.Shard.All() || len(ws.OtherVersions) > 0 {
		// The shard's digests', or this version's, matched by key: the
		// week's counts hold every version's receipts.
		c.ByState = tl.ReceiptStates
	}
	ws.CustomersMoreThanOneVersion = tl.MoreThanOneVersion
	ws.Settle(c, ReceiptStates)
	return ws, c, stones, nil
}

// otherVersions returns the other content versions of spec's type that
// the week is pinned under, in order.
func otherVersions(ctx context.Context, store ledger.Store, spec digest.Spec) ([]string, error) {
	pins, err := store.WeekPins(ctx, spec.Week)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, p := range pins {
		if p.Type == spec.Type && p.Version != spec.Version {
			out = append(out, p.Version)
		}
	}
	slices.Sort(out)
	return out, nil
}

// lastRun adds how the last run of pin ended.
func lastRun(ctx context.Context, ws *Report, store ledger.Store, pin digest.SnapshotPin) error {
	e, ok, err := store.LastRun(ctx, pin)
	if err != nil || !ok {
		return err
	}
	ws.LastRun = &e
	return nil
}

// PinnedSpec reads the week's pin without making one: spec in the pinned
// zone, and the pin (as_of, key id); false when no run has pinned the week.
func PinnedSpec(ctx context.Context, store ledger.Store, spec digest.Spec) (digest.Spec, digest.WeekPin, bool, error) {
	wp, ok, err := store.Pinned(ctx, digest.SnapshotPin{Type: spec.Type, Week: spec.Week, Version: spec.Version})
	if err != nil || !ok {
		return spec, wp, false, err
	}
	if wp.Zone != "" {
		loc, err := time.LoadLocation(wp.Zone)
		if err != nil {
			return spec, wp, false, fmt.Errorf("week %s is pinned to zone %q: %w", spec.Week, wp.Zone, err)
		}
		spec.Location = loc
	}
	return spec, wp, true, nil
}
