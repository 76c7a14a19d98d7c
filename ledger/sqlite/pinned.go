package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/internal/rules"
)

// Pinned returns what the first run of pin fixed; see the PostgreSQL store's Pinned.
func (s *Store) Pinned(ctx context.Context, pin digest.SnapshotPin) (_ digest.WeekPin, _ bool, err error) {
	defer classify(&err)
	var (
		wp         digest.WeekPin
		asOf, from sql.NullInt64
		zone, kid  sql.NullString
	)
	err = s.db.QueryRowContext(ctx, pinnedSQL, pin.Type, pin.Week.String(), pin.Version).Scan(&asOf, &zone, &kid, &wp.Partial, &from, &wp.ResentAsNewVersion)
	if errors.Is(err, sql.ErrNoRows) {
		return digest.WeekPin{}, false, nil
	}
	if err != nil {
		return digest.WeekPin{}, false, fmt.Errorf("read pin %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
	}
	wp.AsOf, wp.Zone, wp.KeyID, wp.RepinnedFrom = fromMicros(asOf), zone.String, kid.String, fromMicros(from)
	return wp, true, nil
}

// Repin moves pin's cutoff forward to asOf; see ledger.Store.
func (s *Store) Repin(ctx context.Context, pin digest.SnapshotPin, asOf time.Time, by ledger.Action) (_ time.Time, err error) {
	defer classify(&err)
	var from sql.NullInt64
	err = s.write(ctx, func(tx sqliteTx) error {
		return tx.QueryRowContext(ctx, repinSQL, pin.Type, pin.Week.String(), pin.Version, asOf.UnixMicro(),
			s.nowUTC().UnixMicro(), by.Detail("repinned")).Scan(&from)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, rules.RepinRefused(ctx, s, pin, asOf)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("repin %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
	}
	return fromMicros(from), nil
}

// ObservedKeys returns those of keys observed in week.
func (s *Store) ObservedKeys(ctx context.Context, week digest.ISOWeek, keys []digest.Key) (_ map[digest.Key]bool, err error) {
	defer classify(&err)
	out := map[digest.Key]bool{}
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := s.db.QueryContext(ctx, observedKeysSQL, week.String(), jsonKeys(keys))
	if err != nil {
		return nil, fmt.Errorf("observed keys of %s: %w", week, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		out[digest.Key(k)] = true
	}
	return out, rows.Err()
}

// WeekPins returns every pin of week (digest.WeekReceipts).
func (s *Store) WeekPins(ctx context.Context, week digest.ISOWeek) (_ []digest.SnapshotPin, err error) {
	defer classify(&err)
	pins, err := queryAll(ctx, s.db, func(row rowScanner) (digest.SnapshotPin, error) {
		p := digest.SnapshotPin{Week: week}
		err := row.Scan(&p.Type, &p.Version)
		return p, err
	}, weekPinsSQL, week.String())
	if err != nil {
		return nil, fmt.Errorf("pins of %s: %w", week, err)
	}
	return pins, nil
}

// SentByVersion counts week's sent or in-flight receipts of typ by
// content version (digest.VersionCounter).
func (s *Store) SentByVersion(ctx context.Context, week digest.ISOWeek, typ string) (_ map[string]int64, err error) {
	defer classify(&err)
	rows, err := s.db.QueryContext(ctx, sentByVersionSQL, week.String(), typ)
	if err != nil {
		return nil, fmt.Errorf("sent by version of %s/%s: %w", typ, week, err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var (
			v string
			n int64
		)
		if err := rows.Scan(&v, &n); err != nil {
			return nil, fmt.Errorf("sent by version of %s/%s: %w", typ, week, err)
		}
		out[v] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sent by version of %s/%s: %w", typ, week, err)
	}
	return out, nil
}
