package sqlite

import (
	"context"
	"fmt"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger/internal/rules"
)

// The statements of "digest verify", in sql/verify.sql.
var (
	weekKeysSQL   = queries.Get("WeekKeys")
	weekStatesSQL = queries.Get("WeekStates")
)

// WeekKeys returns one page of week's keys in state, in key order.
func (s *Store) WeekKeys(ctx context.Context, week digest.ISOWeek, state digest.State, after digest.Key, limit int) (_ []digest.Key, err error) {
	defer classify(&err)
	keys, err := queryAll(ctx, s.db, func(row rowScanner) (digest.Key, error) {
		var k string
		err := row.Scan(&k)
		return digest.Key(k), err
	}, weekKeysSQL, week.String(), string(state), string(after), rules.WeekPageSize(limit))
	if err != nil {
		return nil, fmt.Errorf("week keys: %w", err)
	}
	return keys, nil
}

// WeekStates returns the states of those of keys that are receipts of week.
func (s *Store) WeekStates(ctx context.Context, week digest.ISOWeek, keys []digest.Key) (_ map[digest.Key]digest.State, err error) {
	defer classify(&err)
	states := make(map[digest.Key]digest.State)
	if len(keys) == 0 {
		return states, nil
	}
	type row struct{ key, state string }
	rows, err := queryAll(ctx, s.db, func(r rowScanner) (row, error) {
		var x row
		err := r.Scan(&x.key, &x.state)
		return x, err
	}, weekStatesSQL, week.String(), jsonKeys(keys))
	if err != nil {
		return nil, fmt.Errorf("week states: %w", err)
	}
	for _, r := range rows {
		states[digest.Key(r.key)] = digest.State(r.state)
	}
	return states, nil
}
