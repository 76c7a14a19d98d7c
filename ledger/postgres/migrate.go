package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger/internal/migrate"
	"github.com/weeklydigest/digest/migrations"
)

// Migrate applies pending migrations with goose. A PostgreSQL session-level
// advisory lock, keyed by the current schema, serialises concurrent runs
// (two pods starting at once); the loser waits, then finds nothing to do.
// goose keeps the applied versions in goose_db_version.
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.migrateTo(ctx, migrate.Latest); err != nil {
		return err
	}
	s.ensurePartitionsAhead(ctx)
	return nil
}

// MigrateDownTo rolls the schema back to version, under Migrate's lock:
// what an operator runs, with this version's binary, before rolling the
// image back past a migration the older binary cannot run on (00006
// partitions receipts; the binaries before it claim ON CONFLICT (key)).
//
// It refuses while receipts are claimed under live leases (liveClaims):
// a run sending on the older schema would fail mid-send.
func (s *Store) MigrateDownTo(ctx context.Context, version int64) error {
	if err := s.liveClaims(ctx); err != nil {
		return err
	}
	return s.migrateTo(ctx, version)
}

// migrateTo runs migrate.To under the migration lock. Advisory locks are
// database-wide; keying by schema keeps test schemas (and tenants in
// separate schemas) from waiting on one another. It polls every second
// for up to ten minutes (goose's default polls every 5 s).
func (s *Store) migrateTo(ctx context.Context, version int64) (err error) {
	defer classify(&err)
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	var schema string
	if err := db.QueryRowContext(ctx, queries.Get("CurrentSchema")).Scan(&schema); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	h := fnv.New64a()
	h.Write([]byte("digest.migrate:" + schema))
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(int64(h.Sum64())), lock.WithLockTimeout(1, 600))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return migrate.To(ctx, goose.DialectPostgres, db, migrations.Postgres(), s.log, version, goose.WithSessionLocker(locker))
}

// ensurePartitionsAhead makes, as the role that owns receipts (a run's role
// need not own it, see partition.go), last week's partition, this week's
// and those of the partitionWeeksAhead weeks after it. Migrate does it at
// every deploy and prune at every prune, so that the weeks to come have
// their partitions while either runs more often than partitionWeeksAhead
// weeks apart.
func (s *Store) ensurePartitionsAhead(ctx context.Context) {
	// The process's clock is enough here: it decides nothing a receipt
	// depends on, only which partitions are made ahead; a run makes its
	// own week's (StartWeek) whatever this clock says.
	w := digest.WeekOf(s.now(), time.UTC).Prev()
	for range partitionWeeksAhead + 2 {
		s.ensurePartitionLogged(ctx, w)
		w = w.Next()
	}
}
