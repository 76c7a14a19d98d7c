package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/weeklydigest/digest/digest"
)

// Pinned returns what the first run of pin fixed; see the PostgreSQL store's Pinned.
func (s *Store) Pinned(ctx context.Context, pin digest.SnapshotPin) (_ digest.WeekPin, _ bool, err error) {
	defer classify(&err)
	var (
		wp        digest.WeekPin
		asOf      sql.NullInt64
		zone, kid sql.NullString
	)
	err = s.db.QueryRowContext(ctx, pinnedSQL, pin.Type, pin.Week.String(), pin.Version).Scan(&asOf, &zone, &kid)
	if errors.Is(err, sql.ErrNoRows) {
		return digest.WeekPin{}, false, nil
	}
	if err != nil {
		return digest.WeekPin{}, false, fmt.Errorf("read pin %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
	}
	wp.AsOf, wp.Zone, wp.KeyID = fromMicros(asOf), zone.String, kid.String
	return wp, true, nil
}
