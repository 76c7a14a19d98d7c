package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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
	_, err = s.pool.Exec(ctx, recordExpectationSQL, pin.Type, pin.Week.String(), pin.Version, e.Shard,
		e.AsOf.UTC().Truncate(time.Microsecond), e.Zone, e.KeyID, e.SendEmpty, e.Send, e.Suppressed, e.Empty, e.NotBuilt,
		e.GhostsJSON(), e.RunID, e.RecordedAt.UTC().Truncate(time.Microsecond))
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
	if err := s.pool.QueryRow(ctx, expectationsOthersSQL, pin.Type, pin.Week.String(), pin.Version).Scan(&w.OtherPins, &w.Observed); err != nil {
		return w, fmt.Errorf("expectations %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
	}
	rows, err := s.pool.Query(ctx, expectationsSQL, pin.Type, pin.Week.String(), pin.Version)
	if err != nil {
		return w, fmt.Errorf("expectations %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
	}
	var (
		e      ledger.Expectation
		ghosts string
	)
	_, err = pgx.ForEachRow(rows, []any{&e.Shard, &e.AsOf, &e.Zone, &e.KeyID, &e.SendEmpty, &e.Send, &e.Suppressed, &e.Empty,
		&e.NotBuilt, &ghosts, &e.OtherKeyIDs, &e.RunID, &e.RecordedAt}, func() error {
		g, err := rules.ParseGhosts(ghosts)
		if err != nil {
			return err
		}
		r := e
		r.Ghosts, r.AsOf, r.RecordedAt = g, e.AsOf.UTC(), e.RecordedAt.UTC()
		w.Rows = append(w.Rows, r)
		return nil
	})
	if err != nil {
		return w, fmt.Errorf("expectations %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
	}
	return w, nil
}
