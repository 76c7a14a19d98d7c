package main

import (
	"context"
	"slices"

	"github.com/weeklydigest/digest/digest"
)

// weekPinLister reads the pins of a week (ledger.Store has it).
type weekPinLister interface {
	WeekPins(ctx context.Context, week digest.ISOWeek) ([]digest.SnapshotPin, error)
}

// weekVersions returns version first, then every other content version
// of typ pinned for week, in order: the versions a customer's receipt of
// the week may be under (a resend as a new version leaves one of each).
func weekVersions(ctx context.Context, store weekPinLister, week digest.ISOWeek, typ, version string) ([]string, error) {
	pins, err := store.WeekPins(ctx, week)
	if err != nil {
		return nil, err
	}
	var others []string
	for _, p := range pins {
		if p.Type == typ && p.Version != version && !slices.Contains(others, p.Version) {
			others = append(others, p.Version)
		}
	}
	slices.Sort(others)
	return append([]string{version}, others...), nil
}
