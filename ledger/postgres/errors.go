package postgres

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/internal/rules"
)

// The SQLSTATEs the store tells apart (PostgreSQL's errcodes.txt; the
// names are pgerrcode's).
const (
	sqlstateSerializationFailure = "40001"
	sqlstateDeadlockDetected     = "40P01"
	sqlstateLockNotAvailable     = "55P03"
	sqlstateUndefinedTable       = "42P01"
	sqlstateTooManyConnections   = "53300"
	sqlstateAdminShutdown        = "57P01"
	sqlstateCrashShutdown        = "57P02"
	sqlstateCannotConnectNow     = "57P03"
	sqlstateFeatureNotSupported  = "0A000"
	// sqlstateClassConnectionException is the class (first two characters)
	// of the connection exceptions: 08000, 08003, 08006, ….
	sqlstateClassConnectionException = "08"
)

// classOf classifies an error of pgx: a conflict when PostgreSQL rolled
// the transaction back for a serialization failure or a deadlock, or a lock
// stayed busy; transient when the connection failed or the server was
// going away or full, or when pgconn knows nothing reached the server;
// else fatal.
func classOf(err error) ledger.ErrorClass {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case sqlstateSerializationFailure, sqlstateDeadlockDetected, sqlstateLockNotAvailable:
			return ledger.Conflict
		case sqlstateTooManyConnections, sqlstateAdminShutdown, sqlstateCrashShutdown, sqlstateCannotConnectNow:
			return ledger.Transient
		}
		if strings.HasPrefix(pgErr.Code, sqlstateClassConnectionException) {
			return ledger.Transient
		}
		return ledger.Fatal
	}
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return ledger.Transient
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return ledger.Transient
	}
	return ledger.Fatal
}

// staleStatement reports PostgreSQL refusing to run a statement the
// connection prepared before the type of a column it returns changed: a
// migration under a process in flight (00017 changed the collation of
// every key column, which PostgreSQL before 17 counts as part of the
// type). The statement ran nothing and its batch's transaction is rolled
// back; pgx has dropped it from the connection's cache, so the batch sent
// again prepares it anew.
func staleStatement(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == sqlstateFeatureNotSupported &&
		strings.Contains(pgErr.Message, "cached plan must not change result type")
}

// classify classifies *errp as it leaves the store; see rules.Classify.
func classify(errp *error) { rules.Classify(errp, classOf) }
