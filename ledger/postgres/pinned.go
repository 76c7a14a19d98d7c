package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/digest"
)

// Pinned returns what the first run of pin fixed (as_of, zone, key id),
// and false when no run has pinned it yet. Unlike PinSnapshot it never
// pins: a preview or a test send reads the week as a run would, without
// deciding its cutoff. ReceiptsByKeyID is left nil.
func (s *Store) Pinned(ctx context.Context, pin digest.SnapshotPin) (_ digest.WeekPin, _ bool, err error) {
	defer classify(&err)
	var (
		wp        digest.WeekPin
		zone, kid *string
	)
	err = s.pool.QueryRow(ctx, pinnedSQL, pin.Type, pin.Week.String(), pin.Version).Scan(&wp.AsOf, &zone, &kid)
	if errors.Is(err, pgx.ErrNoRows) {
		return digest.WeekPin{}, false, nil
	}
	if err != nil {
		return digest.WeekPin{}, false, fmt.Errorf("read pin %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
	}
	wp.AsOf = wp.AsOf.UTC()
	wp.Zone, wp.KeyID = deref(zone), deref(kid)
	return wp, true, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
