package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/ledgertest"
	"github.com/weeklydigest/digest/ledger/postgres"
)

// driver is the PostgreSQL store for the contract suite: each database is
// a schema of its own (internal/pgtest).
var driver = ledgertest.Driver{
	Fresh: func(t testing.TB) ledger.Config { return ledger.Config{DatabaseURL: pgtest.Schema(t)} },
	Open: func(ctx context.Context, cfg ledger.Config) (ledger.Store, error) {
		s, err := postgres.Open(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return s, nil
	},
	Pool: func(s ledger.Store) *pgxpool.Pool { return s.(*postgres.Store).Pool() },
}

func TestLedger(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, driver)
}

func BenchmarkClaimSent(b *testing.B) { ledgertest.BenchmarkClaimSent(b, driver) }

func BenchmarkClaimSentBatch100(b *testing.B) { ledgertest.BenchmarkClaimSentBatch100(b, driver) }
