package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

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
	rows, err := s.pool.Query(ctx, weekKeysSQL, week.String(), string(state), string(after), rules.WeekPageSize(limit))
	if err != nil {
		return nil, fmt.Errorf("week keys: %w", err)
	}
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (digest.Key, error) {
		var k string
		err := row.Scan(&k)
		return digest.Key(k), err
	})
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
	rows, err := s.pool.Query(ctx, weekStatesSQL, week.String(), rules.KeyStrings(keys))
	if err != nil {
		return nil, fmt.Errorf("week states: %w", err)
	}
	var key, state string
	_, err = pgx.ForEachRow(rows, []any{&key, &state}, func() error {
		states[digest.Key(key)] = digest.State(state)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("week states: %w", err)
	}
	return states, nil
}
