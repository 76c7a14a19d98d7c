package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/internal/migrate"
	"github.com/weeklydigest/digest/ledger/internal/rules"
	"github.com/weeklydigest/digest/migrations"
)

// Schema reads the highest migration goose recorded (0 when the ledger was
// never migrated).
func (s *Store) Schema(ctx context.Context) (_ ledger.Schema, err error) {
	defer classify(&err)
	sc := ledger.Schema{Want: migrate.Last(migrations.Postgres())}
	var exists bool
	if err := s.pool.QueryRow(ctx, queries.Get("HasVersionTable")).Scan(&exists); err != nil {
		return sc, fmt.Errorf("read schema version: %w", err)
	}
	if !exists {
		return sc, nil
	}
	if err := s.pool.QueryRow(ctx, queries.Get("SchemaVersion")).Scan(&sc.Have); err != nil {
		if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == sqlstateInsufficientPrivilege {
			return sc, fmt.Errorf("%w: grant SELECT on goose_db_version to it (docs/security.md)", ledger.ErrSchemaUnreadable)
		}
		return sc, fmt.Errorf("read schema version: %w", err)
	}
	return sc, nil
}

// liveClaims refuses a roll-back while receipts are claimed under leases
// that have not expired, by the earlier of the store's clock and the
// server's (see LiveClaims in sql/schema.sql).
func (s *Store) liveClaims(ctx context.Context) error {
	var n int64
	if err := s.pool.QueryRow(ctx, queries.Get("LiveClaims"), s.clockArg()).Scan(&n); err != nil {
		return fmt.Errorf("migrate: count live claims: %w", err)
	}
	return rules.RefuseLiveClaims(n)
}
