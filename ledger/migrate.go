package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/weeklydigest/digest/migrations"
)

// Migrate applies pending migrations with goose. A PostgreSQL session-level
// advisory lock, keyed by the current schema, serialises concurrent runs
// (two pods starting at once); the loser waits, then finds nothing to do.
// goose keeps the applied versions in goose_db_version.
func (s *Postgres) Migrate(ctx context.Context) error {
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	var schema string
	if err := db.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// Advisory locks are database-wide; keying by schema keeps test schemas
	// (and tenants in separate schemas) from waiting on one another.
	h := fnv.New64a()
	h.Write([]byte("digest.migrate:" + schema))
	// Poll every second for up to ten minutes (goose's default polls every 5 s).
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(int64(h.Sum64())), lock.WithLockTimeout(1, 600))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return migrate(ctx, goose.DialectPostgres, db, migrations.Postgres(), s.log, goose.WithSessionLocker(locker))
}

func migrate(ctx context.Context, dialect goose.Dialect, db *sql.DB, fsys fs.FS, log *slog.Logger, opts ...goose.ProviderOption) error {
	opts = append(opts, goose.WithDisableGlobalRegistry(true))
	p, err := goose.NewProvider(dialect, db, fsys, opts...)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, r := range results {
		log.InfoContext(ctx, "ledger migration applied", "file", r.Source.Path, "duration", r.Duration)
	}
	if len(results) == 0 {
		log.DebugContext(ctx, "ledger schema up to date")
	}
	return nil
}
