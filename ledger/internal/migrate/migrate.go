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
)

// Up applies the pending migrations of fsys to db and logs each one.
func Up(ctx context.Context, dialect goose.Dialect, db *sql.DB, fsys fs.FS, log *slog.Logger, opts ...goose.ProviderOption) error {
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

// DownTo rolls the schema back to version, undoing each later migration of
// fsys in turn (newest first), and logs each one. A version at or above
// the current one does nothing.
func DownTo(ctx context.Context, dialect goose.Dialect, db *sql.DB, fsys fs.FS, log *slog.Logger, version int64, opts ...goose.ProviderOption) error {
	if version < 1 {
		return fmt.Errorf("migrate: down to version %d: the first migration creates the ledger; roll back to 1 or later", version)
	}
	opts = append(opts, goose.WithDisableGlobalRegistry(true))
	p, err := goose.NewProvider(dialect, db, fsys, opts...)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	results, err := p.DownTo(ctx, version)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, r := range results {
		log.InfoContext(ctx, "ledger migration rolled back", "file", r.Source.Path, "duration", r.Duration)
	}
	if len(results) == 0 {
		log.InfoContext(ctx, "ledger schema already at or below the version", "version", version)
	}
	return nil
}
