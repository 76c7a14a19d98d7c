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

// The suppression list's statements, in sql/suppression.sql.
var (
	suppressSQL           = queries.Get("Suppress")
	unsuppressSQL         = queries.Get("Unsuppress")
	suppressedSQL         = queries.Get("Suppressed")
	listSuppressionsSQL   = queries.Get("ListSuppressions")
	suppressionHistorySQL = queries.Get("SuppressionHistory")
)

// Suppress records sp unless one of its keys is suppressed already, in
// one statement (see Suppress in sql/suppression.sql).
func (s *Store) Suppress(ctx context.Context, sp ledger.Suppression) (_ bool, err error) {
	defer classify(&err)
	if err := sp.Validate(); err != nil {
		return false, err
	}
	var id int64
	err = s.pool.QueryRow(ctx, suppressSQL, rules.KeyStrings(sp.Keys), string(sp.Subject),
		string(sp.Reason), sp.Source, sp.By, s.now().UTC().Truncate(time.Microsecond)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil // suppressed already
	}
	if err != nil {
		return false, fmt.Errorf("suppress %s: %w", sp.Key(), err)
	}
	return true, nil
}

// Unsuppress removes the suppressions under keys, recording each removal.
func (s *Store) Unsuppress(ctx context.Context, keys []digest.SuppressionKey, by ledger.Action) (_ int, err error) {
	defer classify(&err)
	if err := rules.ValidateUnsuppress(keys, by); err != nil {
		return 0, err
	}
	rows, err := s.pool.Query(ctx, unsuppressSQL, rules.KeyStrings(keys), by.By, by.Reason,
		s.now().UTC().Truncate(time.Microsecond))
	if err != nil {
		return 0, fmt.Errorf("unsuppress %s: %w", keys[0], err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("unsuppress %s: %w", keys[0], err)
	}
	return len(ids), nil
}

// Suppressed returns which of keys are suppressed, in one query: a batch
// of one, so that it is sent again where a run's batches are (sendBatch).
func (s *Store) Suppressed(ctx context.Context, keys []digest.SuppressionKey) (_ map[digest.SuppressionKey]bool, err error) {
	defer classify(&err)
	out := make(map[digest.SuppressionKey]bool)
	if len(keys) == 0 {
		return out, nil
	}
	var found []string
	build := func() *pgx.Batch {
		b := &pgx.Batch{}
		b.Queue(suppressedSQL, rules.KeyStrings(keys))
		return b
	}
	read := func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		found, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	}
	if err := s.sendBatch(ctx, customPlans, build, read); err != nil {
		return nil, fmt.Errorf("look up %d suppression keys: %w", len(keys), err)
	}
	for _, k := range found {
		out[digest.SuppressionKey(k)] = true
	}
	return out, nil
}

// ListSuppressions returns suppressions ordered by key.
func (s *Store) ListSuppressions(ctx context.Context, f ledger.SuppressionFilter) (_ []ledger.Suppression, err error) {
	defer classify(&err)
	rows, err := s.pool.Query(ctx, listSuppressionsSQL, rules.KeyStrings(f.Keys), string(f.After), f.PageSize())
	if err != nil {
		return nil, fmt.Errorf("list suppressions: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.Suppression, error) {
		var (
			sp                   ledger.Suppression
			key, subject, reason string
		)
		if err := row.Scan(&key, &subject, &reason, &sp.Source, &sp.By, &sp.At); err != nil {
			return sp, err
		}
		sp.Keys, sp.Subject, sp.Reason, sp.At = []digest.SuppressionKey{digest.SuppressionKey(key)},
			digest.SuppressionSubject(subject), digest.SuppressionReason(reason), sp.At.UTC()
		return sp, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list suppressions: %w", err)
	}
	return list, nil
}

// SuppressionHistory returns the adds and removals of keys, oldest first.
func (s *Store) SuppressionHistory(ctx context.Context, keys []digest.SuppressionKey, limit int) (_ []ledger.SuppressionEvent, err error) {
	defer classify(&err)
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, suppressionHistorySQL, rules.KeyStrings(keys), limit)
	if err != nil {
		return nil, fmt.Errorf("suppression history: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.SuppressionEvent, error) {
		var (
			e                            ledger.SuppressionEvent
			key, subject, action, reason string
		)
		if err := row.Scan(&e.ID, &key, &subject, &action, &reason, &e.Source, &e.By, &e.Note, &e.At); err != nil {
			return e, err
		}
		e.Key, e.Subject, e.Action, e.Reason, e.At = digest.SuppressionKey(key), digest.SuppressionSubject(subject),
			ledger.SuppressionAction(action), digest.SuppressionReason(reason), e.At.UTC()
		return e, nil
	})
	if err != nil {
		return nil, fmt.Errorf("suppression history: %w", err)
	}
	return list, nil
}
