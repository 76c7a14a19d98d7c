package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/internal/rules"
)

// The expectation statements, in sql/runs.sql.
var (
	recordExpectationSQL  = queries.Get("RecordExpectation")
	expectationsSQL       = queries.Get("Expectations")
	expectationsOthersSQL = queries.Get("ExpectationsOthers")
)

// RecordExpectation records what a run's read of one shard of pin found;
// the last read of a shard wins.
func (s *Store) RecordExpectation(ctx context.Context, pin digest.SnapshotPin, e ledger.Expectation) (err error) {
	defer classify(&err)
	if err := e.Validate(); err != nil {
		return err
	}
	err = s.write(ctx, func(tx sqliteTx) error {
		_, err := tx.ExecContext(ctx, recordExpectationSQL, pin.Type, pin.Week.String(), pin.Version, e.Shard,
			e.AsOf.UnixMicro(), e.Zone, e.KeyID, e.SendEmpty, e.Send, e.Suppressed, e.Empty, e.NotBuilt,
			e.GhostsJSON(), e.RunID, e.RecordedAt.UnixMicro())
		return err
	})
	if err != nil {
		return fmt.Errorf("record expectation %s/%s/%s %s: %w", pin.Type, pin.Week, pin.Version, e.Shard, err)
	}
	return nil
}

// Expectations returns pin's recorded expectations and what else its week
// holds.
func (s *Store) Expectations(ctx context.Context, pin digest.SnapshotPin) (_ ledger.WeekExpectations, err error) {
	defer classify(&err)
	var w ledger.WeekExpectations
	if err := s.db.QueryRowContext(ctx, expectationsOthersSQL, pin.Type, pin.Week.String(), pin.Version).Scan(&w.OtherPins, &w.Observed); err != nil {
		return w, fmt.Errorf("expectations %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
	}
	rows, err := s.db.QueryContext(ctx, expectationsSQL, pin.Type, pin.Week.String(), pin.Version)
	if err != nil {
		return w, fmt.Errorf("expectations %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			e        ledger.Expectation
			asOf, at sql.NullInt64
			ghosts   string
		)
		if err := rows.Scan(&e.Shard, &asOf, &e.Zone, &e.KeyID, &e.SendEmpty, &e.Send, &e.Suppressed, &e.Empty,
			&e.NotBuilt, &ghosts, &e.OtherKeyIDs, &e.RunID, &at); err != nil {
			return w, fmt.Errorf("expectations %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
		}
		if e.Ghosts, err = rules.ParseGhosts(ghosts); err != nil {
			return w, err
		}
		e.AsOf, e.RecordedAt = fromMicros(asOf), fromMicros(at)
		w.Rows = append(w.Rows, e)
	}
	if err := rows.Err(); err != nil {
		return w, fmt.Errorf("expectations %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
	}
	return w, nil
}
