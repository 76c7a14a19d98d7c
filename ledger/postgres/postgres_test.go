package postgres_test

import (
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
	Fresh: func(t testing.TB) ledgertest.Database { return ledgertest.Database{URL: pgtest.Schema(t)} },
	Open: func(t testing.TB, db ledgertest.Database, c ledgertest.Clocks) ledger.Store {
		s, _ := postgres.OpenTest(t, db.URL, postgres.Config{Now: c.Now, LedgerNow: c.LedgerNow})
		return s
	},
	Pool: func(t testing.TB, db ledgertest.Database) *pgxpool.Pool {
		_, pool := postgres.OpenTest(t, db.URL, postgres.Config{})
		return pool
	},
}

func TestLedger(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, driver)
}

func BenchmarkClaimSent(b *testing.B) { ledgertest.BenchmarkClaimSent(b, driver) }

func BenchmarkClaimSentBatch100(b *testing.B) { ledgertest.BenchmarkClaimSentBatch100(b, driver) }
