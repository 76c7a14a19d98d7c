package sqlite

import (
	"context"
	"fmt"

	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/internal/migrate"
	"github.com/weeklydigest/digest/ledger/internal/rules"
	"github.com/weeklydigest/digest/migrations"
)

// Schema reads the highest migration goose recorded (0 when the file was
// never migrated).
func (s *Store) Schema(ctx context.Context) (_ ledger.Schema, err error) {
	defer classify(&err)
	sc := ledger.Schema{Want: migrate.Last(migrations.SQLite())}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'goose_db_version'`).Scan(&n); err != nil {
		return sc, fmt.Errorf("read schema version: %w", err)
	}
	if n == 0 {
		return sc, nil
	}
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(version_id), 0) FROM goose_db_version`).Scan(&sc.Have); err != nil {
		return sc, fmt.Errorf("read schema version: %w", err)
	}
	return sc, nil
}

// liveClaims refuses a roll-back while receipts are claimed under leases
// that have not expired by the ledger's clock (?1 its stand-in in tests).
func (s *Store) liveClaims(ctx context.Context) error {
	var n int64
	var stub any
	if s.ledgerNow != nil {
		stub = s.ledgerNow().UnixMicro()
	}
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM receipts WHERE state = 'claimed'
		AND lease_expires_at > coalesce(?1, CAST(unixepoch('subsec') * 1000000 AS INTEGER))`, stub).Scan(&n); err != nil {
		return fmt.Errorf("migrate: count live claims: %w", err)
	}
	return rules.RefuseLiveClaims(n)
}
