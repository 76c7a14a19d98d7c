package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/internal/rules"
)

// The suppression list's statements, in sql/suppression.sql.
var (
	anySuppressedSQL          = queries.Get("AnySuppressed")
	insertSuppressionSQL      = queries.Get("InsertSuppression")
	insertSuppressionEventSQL = queries.Get("InsertSuppressionEvent")
	deleteSuppressionsSQL     = queries.Get("DeleteSuppressions")
	suppressedSQL             = queries.Get("Suppressed")
	listSuppressionsSQL       = queries.Get("ListSuppressions")
	suppressionHistorySQL     = queries.Get("SuppressionHistory")
)

// jsonSuppressionKeys is keys as a JSON array, for json_each.
func jsonSuppressionKeys(keys []digest.SuppressionKey) string {
	b, err := json.Marshal(rules.KeyStrings(keys))
	if err != nil {
		panic(err) // unreachable: a []string always marshals
	}
	return string(b)
}

// Suppress records sp unless one of its keys is suppressed already, in
// one write transaction (which BEGIN IMMEDIATE serialises).
func (s *Store) Suppress(ctx context.Context, sp ledger.Suppression) (added bool, err error) {
	defer classify(&err)
	if err := sp.Validate(); err != nil {
		return false, err
	}
	at := s.nowUTC().UnixMicro()
	err = s.write(ctx, func(tx sqliteTx) (err error) {
		added, err = suppressTx(ctx, tx, sp, at)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("suppress %s: %w", sp.Key(), err)
	}
	return added, nil
}

// suppressTx records sp at at (microseconds) in tx unless one of its keys
// is suppressed already, with its history row.
func suppressTx(ctx context.Context, tx sqliteTx, sp ledger.Suppression, at int64) (bool, error) {
	var exists bool
	if err := tx.QueryRowContext(ctx, anySuppressedSQL, jsonSuppressionKeys(sp.Keys)).Scan(&exists); err != nil || exists {
		return false, err
	}
	res, err := tx.ExecContext(ctx, insertSuppressionSQL, string(sp.Key()), string(sp.Subject), string(sp.Reason), sp.Source, sp.By, at)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	_, err = tx.ExecContext(ctx, insertSuppressionEventSQL, string(sp.Key()), string(sp.Subject), string(ledger.SuppressionAdded),
		string(sp.Reason), sp.Source, sp.By, "", at)
	return err == nil, err
}

// Unsuppress removes the suppressions under keys, recording each removal.
func (s *Store) Unsuppress(ctx context.Context, keys []digest.SuppressionKey, by ledger.Action) (removed int, err error) {
	defer classify(&err)
	if err := rules.ValidateUnsuppress(keys, by); err != nil {
		return 0, err
	}
	at := s.nowUTC().UnixMicro()
	err = s.write(ctx, func(tx sqliteTx) error {
		rows, err := tx.QueryContext(ctx, deleteSuppressionsSQL, jsonSuppressionKeys(keys))
		if err != nil {
			return err
		}
		var gone []ledger.SuppressionEvent
		for rows.Next() {
			var e ledger.SuppressionEvent
			if err := rows.Scan(&e.Key, &e.Subject, &e.Reason, &e.Source); err != nil {
				rows.Close()
				return err
			}
			gone = append(gone, e)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, e := range gone {
			if _, err := tx.ExecContext(ctx, insertSuppressionEventSQL, string(e.Key), string(e.Subject), string(ledger.SuppressionRemoved),
				string(e.Reason), e.Source, by.By, by.Reason, at); err != nil {
				return err
			}
		}
		removed = len(gone)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("unsuppress %s: %w", keys[0], err)
	}
	return removed, nil
}

// Suppressed returns which of keys are suppressed, in one query.
func (s *Store) Suppressed(ctx context.Context, keys []digest.SuppressionKey) (_ map[digest.SuppressionKey]bool, err error) {
	defer classify(&err)
	out := make(map[digest.SuppressionKey]bool)
	if len(keys) == 0 {
		return out, nil
	}
	found, err := queryAll(ctx, s.db, func(r rowScanner) (string, error) {
		var k string
		return k, r.Scan(&k)
	}, suppressedSQL, jsonSuppressionKeys(keys))
	if err != nil {
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
	list, err := queryAll(ctx, s.db, func(r rowScanner) (ledger.Suppression, error) {
		var (
			sp  ledger.Suppression
			key string
			at  sql.NullInt64
		)
		if err := r.Scan(&key, &sp.Subject, &sp.Reason, &sp.Source, &sp.By, &at); err != nil {
			return sp, err
		}
		sp.Keys, sp.At = []digest.SuppressionKey{digest.SuppressionKey(key)}, fromMicros(at)
		return sp, nil
	}, listSuppressionsSQL, jsonSuppressionKeys(f.Keys), string(f.After), f.PageSize())
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
	list, err := queryAll(ctx, s.db, func(r rowScanner) (ledger.SuppressionEvent, error) {
		var (
			e  ledger.SuppressionEvent
			at sql.NullInt64
		)
		if err := r.Scan(&e.ID, &e.Key, &e.Subject, &e.Action, &e.Reason, &e.Source, &e.By, &e.Note, &at); err != nil {
			return e, err
		}
		e.At = fromMicros(at)
		return e, nil
	}, suppressionHistorySQL, jsonSuppressionKeys(keys), limit)
	if err != nil {
		return nil, fmt.Errorf("suppression history: %w", err)
	}
	return list, nil
}
