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
