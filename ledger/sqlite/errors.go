package sqlite

import (
	"errors"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/internal/rules"
)

// The SQLite result codes the store tells apart, by their primary code
// (the low byte of an extended code).
const (
	sqliteBusy   = sqlite3.SQLITE_BUSY   // another connection holds the lock past the busy timeout
	sqliteLocked = sqlite3.SQLITE_LOCKED // a conflict inside this connection's shared cache
)

// resultCode returns the primary SQLite result code of err, and false when
// err is not SQLite's.
func resultCode(err error) (int, bool) {
	var se *sqlitedriver.Error
	if !errors.As(err, &se) {
		return 0, false
	}
	return se.Code() & 0xff, true
}

// isBusy reports SQLITE_BUSY (or an extended code of it).
func isBusy(err error) bool {
	code, ok := resultCode(err)
	return ok && code == sqliteBusy
}

// classOf classifies an error of the SQLite driver: a conflict when the
// database stayed locked by another writer; else fatal (a file that
// cannot be read or written does not heal by waiting).
func classOf(err error) ledger.ErrorClass {
	if code, ok := resultCode(err); ok && (code == sqliteBusy || code == sqliteLocked) {
		return ledger.Conflict
	}
	return ledger.Fatal
}

// classify classifies *errp as it leaves the store; see rules.Classify.
func classify(errp *error) { rules.Classify(errp, classOf) }
