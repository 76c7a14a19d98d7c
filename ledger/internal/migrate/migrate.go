// Package migrate applies a store's embedded goose migrations; both
// ledger stores use it.
package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/pressly/goose/v3"

	"github.com/weeklydigest/digest/migrations"
)

// Latest is the version To migrates to when it applies every pending
// migration.
const Latest int64 = -1

// To migrates db to version with the migrations of fsys, logging each one
// applied or rolled back: with Latest, it applies the pending ones; with a
// version of 1 or more, it rolls back each later migration in turn, newest
// first (a version at or above the current one does nothing).
func To(ctx context.Context, dialect goose.Dialect, db *sql.DB, fsys fs.FS, log *slog.Logger, version int64, opts ...goose.ProviderOption) error {
	if version != Latest && version < 1 {
		return fmt.Errorf("migrate: down to version %d: the first migration creates the ledger; roll back to 1 or later", version)
	}
	opts = append(opts, goose.WithDisableGlobalRegistry(true))
	p, err := goose.NewProvider(dialect, db, fsys, opts...)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var results []*goose.MigrationResult
	if version == Latest {
		results, err = p.Up(ctx)
	} else {
		results, err = p.DownTo(ctx, version)
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	what := "ledger migration applied"
	if version != Latest {
		what = "ledger migration rolled back"
	}
	for _, r := range results {
		log.InfoContext(ctx, what, "file", r.Source.Path, "duration", r.Duration)
	}
	switch {
	case len(results) > 0:
	case version == Latest:
		log.DebugContext(ctx, "ledger schema up to date")
	default:
		log.InfoContext(ctx, "ledger schema already at or below the version", "version", version)
	}
	return nil
}

// Last returns the version of the last migration in fsys (NNNNN_name.sql),
// the one a schema must be at for this binary.
func Last(fsys fs.FS) int64 { return migrations.Last(fsys) }
