package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// The run-end statements, in sql/runs.sql.
var (
	recordRunEndSQL = queries.Get("RecordRunEnd")
	lastRunSQL      = queries.Get("LastRun")
)

// RecordRunEnd records how a run of pin ended; the last one to end wins.
func (s *Store) RecordRunEnd(ctx context.Context, pin digest.SnapshotPin, e ledger.RunEnd) (err error) {
	defer classify(&err)
	if err := e.Validate(); err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, recordRunEndSQL, pin.Type, pin.Week.String(), pin.Version,
		e.RunID, e.Mode, e.Shard, e.ExitCode, e.StartedAt.UTC().Truncate(time.Microsecond), e.EndedAt.UTC().Truncate(time.Microsecond))
	if err != nil {
		return fmt.Errorf("record run end %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
	}
	return nil
}

// LastRun returns how the last run of pin ended, and false if none has.
func (s *Store) LastRun(ctx context.Context, pin digest.SnapshotPin) (_ ledger.RunEnd, _ bool, err error) {
	defer classify(&err)
	var e ledger.RunEnd
	err = s.pool.QueryRow(ctx, lastRunSQL, pin.Type, pin.Week.String(), pin.Version).
		Scan(&e.RunID, &e.Mode, &e.Shard, &e.ExitCode, &e.StartedAt, &e.EndedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.RunEnd{}, false, nil
	}
	if err != nil {
		return ledger.RunEnd{}, false, fmt.Errorf("last run %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
	}
	e.StartedAt, e.EndedAt = e.StartedAt.UTC(), e.EndedAt.UTC()
	return e, true, nil
}
