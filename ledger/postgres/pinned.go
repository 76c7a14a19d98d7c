package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/internal/rules"
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
		from      *time.Time
	)
	err = s.pool.QueryRow(ctx, pinnedSQL, pin.Type, pin.Week.String(), pin.Version).Scan(&wp.AsOf, &zone, &kid, &wp.Partial, &from, &wp.ResentAsNewVersion)
	if errors.Is(err, pgx.ErrNoRows) {
		return digest.WeekPin{}, false, nil
	}
	if err != nil {
		return digest.WeekPin{}, false, fmt.Errorf("read pin %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
	}
	wp.AsOf = wp.AsOf.UTC()
	wp.Zone, wp.KeyID, wp.RepinnedFrom = deref(zone), deref(kid), timeOrZero(from)
	return wp, true, nil
}

// Repin moves pin's cutoff forward to asOf; see ledger.Store.
func (s *Store) Repin(ctx context.Context, pin digest.SnapshotPin, asOf time.Time, by ledger.Action) (_ time.Time, err error) {
	defer classify(&err)
	var from time.Time
	err = s.pool.QueryRow(ctx, repinSQL, pin.Type, pin.Week.String(), pin.Version, asOf.UTC().Truncate(time.Microsecond),
		s.nowUTC(), by.Detail("repinned")).Scan(&from)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, rules.RepinRefused(ctx, s, pin, asOf)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("repin %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
	}
	return from.UTC(), nil
}

// ObservedKeys returns those of keys observed in week.
func (s *Store) ObservedKeys(ctx context.Context, week digest.ISOWeek, keys []digest.Key) (_ map[digest.Key]bool, err error) {
	defer classify(&err)
	out := map[digest.Key]bool{}
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, observedKeysSQL, week.String(), rules.KeyStrings(keys))
	if err != nil {
		return nil, fmt.Errorf("observed keys of %s: %w", week, err)
	}
	var k string
	_, err = pgx.ForEachRow(rows, []any{&k}, func() error {
		out[digest.Key(k)] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("observed keys of %s: %w", week, err)
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// WeekPins returns every pin of week (digest.WeekReceipts).
func (s *Store) WeekPins(ctx context.Context, week digest.ISOWeek) (_ []digest.SnapshotPin, err error) {
	defer classify(&err)
	rows, err := s.pool.Query(ctx, weekPinsSQL, week.String())
	if err != nil {
		return nil, fmt.Errorf("pins of %s: %w", week, err)
	}
	pins, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (digest.SnapshotPin, error) {
		p := digest.SnapshotPin{Week: week}
		err := row.Scan(&p.Type, &p.Version)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("pins of %s: %w", week, err)
	}
	return pins, nil
}

// SentByVersion counts week's sent or in-flight receipts of typ by
// content version (digest.VersionCounter).
func (s *Store) SentByVersion(ctx context.Context, week digest.ISOWeek, typ string) (_ map[string]int64, err error) {
	defer classify(&err)
	rows, err := s.pool.Query(ctx, sentByVersionSQL, week.String(), typ)
	if err != nil {
		return nil, fmt.Errorf("sent by version of %s/%s: %w", typ, week, err)
	}
	out := map[string]int64{}
	var (
		v string
		n int64
	)
	if _, err = pgx.ForEachRow(rows, []any{&v, &n}, func() error {
		out[v] = n
		return nil
	}); err != nil {
		return nil, fmt.Errorf("sent by version of %s/%s: %w", typ, week, err)
	}
	return out, nil
}
