package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/weeklydigest/digest/ledger"
)

// TestErrorsLeaveClassified checks the classes of real SQLite errors: a
// write lock another connection holds is a conflict, a file that cannot be
// opened is fatal.
func TestErrorsLeaveClassified(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	holder, err := sql.Open("sqlite", sqliteDSN(path, "immediate", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	tx, err := holder.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	other, err := sql.Open("sqlite", sqliteDSN(path, "immediate", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = other.BeginTx(ctx, nil)
	if !isBusy(err) {
		t.Fatalf("second writer: %v, want SQLITE_BUSY", err)
	}
	classify(&err)
	var de *ledger.DriverError
	if !errors.As(err, &de) || ledger.ErrorClassOf(err) != ledger.Conflict {
		t.Fatalf("busy: %v classified %s, want conflict", err, ledger.ErrorClassOf(err))
	}

	_, err = Open(ctx, Config{Path: filepath.Join(t.TempDir(), "no", "such", "dir", "ledger.db")})
	if !errors.As(err, &de) || ledger.ErrorClassOf(err) != ledger.Fatal {
		t.Fatalf("open in a missing directory: %v (%T), want a fatal DriverError", err, err)
	}
	_, err = Open(ctx, Config{Path: "bad?name"})
	if !errors.Is(err, ledger.ErrInvalid) || errors.As(err, &de) {
		t.Fatalf("open a path with '?': %v, want a plain ErrInvalid", err)
	}
}
