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
	Fresh: func(t testing.TB) ledgertest.Database {
		return ledgertest.Database{Path: filepath.Join(t.TempDir(), "ledger.db")}
	},
	Open: func(t testing.TB, db ledgertest.Database, c ledgertest.Clocks) ledger.Store {
		s, err := sqlite.Open(context.Background(), sqlite.Config{Path: db.Path, Now: c.Now, LedgerNow: c.LedgerNow})
		if err != nil {
			t.Fatalf("open sqlite: %v", err)
		}
		return s
	},
}

func TestLedger(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, driver)
}

func BenchmarkClaimSent(b *testing.B) { ledgertest.BenchmarkClaimSent(b, driver) }

func BenchmarkClaimSentBatch100(b *testing.B) { ledgertest.BenchmarkClaimSentBatch100(b, driver) }
