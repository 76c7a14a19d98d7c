package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

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
	err = s.write(ctx, func(tx sqliteTx) error {
		_, err := tx.ExecContext(ctx, recordRunEndSQL, pin.Type, pin.Week.String(), pin.Version,
			e.RunID, e.Mode, e.Shard, e.ExitCode, e.StartedAt.UnixMicro(), e.EndedAt.UnixMicro())
		return err
	})
	if err != nil {
		return fmt.Errorf("record run end %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
	}
	return nil
}

// LastRun returns how the last run of pin ended, and false if none has.
func (s *Store) LastRun(ctx context.Context, pin digest.SnapshotPin) (_ ledger.RunEnd, _ bool, err error) {
	defer classify(&err)
	var (
		e          ledger.RunEnd
		start, end sql.NullInt64
	)
	err = s.db.QueryRowContext(ctx, lastRunSQL, pin.Type, pin.Week.String(), pin.Version).
		Scan(&e.RunID, &e.Mode, &e.Shard, &e.ExitCode, &start, &end)
	if errors.Is(err, sql.ErrNoRows) {
		return ledger.RunEnd{}, false, nil
	}
	if err != nil {
		return ledger.RunEnd{}, false, fmt.Errorf("last run %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
	}
	e.StartedAt, e.EndedAt = fromMicros(start), fromMicros(end)
	return e, true, nil
}
