package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/ledgertest"
	"github.com/weeklydigest/digest/ledger/sqlite"
)

// driver is the SQLite store for the contract suite: each database is a
// file in the test's temporary directory.
var driver = ledgertest.Driver{
	Fresh: func(t testing.TB) ledger.Config {
		return ledger.Config{Path: filepath.Join(t.TempDir(), "ledger.db")}
	},
	Open: func(ctx context.Context, cfg ledger.Config) (ledger.Store, error) {
		s, err := sqlite.Open(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return s, nil
	},
}

func TestLedger(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, driver)
}

func BenchmarkClaimSent(b *testing.B) { ledgertest.BenchmarkClaimSent(b, driver) }

func BenchmarkClaimSentBatch100(b *testing.B) { ledgertest.BenchmarkClaimSentBatch100(b, driver) }
