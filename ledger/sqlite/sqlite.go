// Package sqlite is the receipt ledger in one embedded SQLite file
// (modernc.org/sqlite, no cgo): each call is one BEGIN IMMEDIATE
// transaction that applies the decision rules of package ledger. It
// implements ledger.Store and passes the contract suite of package
// ledgertest.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/internal/migrate"
	"github.com/weeklydigest/digest/ledger/internal/rules"
	"github.com/weeklydigest/digest/ledger/internal/sqlfile"
	"github.com/weeklydigest/digest/migrations"
)

// Store is the embedded ledger in one SQLite file (WAL mode once
// migrated; synchronous FULL so a committed claim or send mark survives
// power loss). Writes run in
// BEGIN IMMEDIATE transactions, one per call, so a claim's read and write
// hold the database's write lock together. Several processes may share the
// file; they wait on each other for up to the busy timeout.
type Store struct {
	db    *sql.DB
	stmts *stmtCache
	path  string
	now   func() time.Time
	// ledgerNow is Config.LedgerNow: nil but in tests.
	ledgerNow func() time.Time
	log       *slog.Logger
}

var (
	_ digest.Ledger = (*Store)(nil)
	_ ledger.Store  = (*Store)(nil)
)

//go:embed sql/*.sql
var sqlFiles embed.FS

// queries are the statements of sql/*.sql, by name.
var queries = sqlfile.MustParse(sqlFiles, "sql")

var (
	pinSnapshotSQL   = queries.Get("PinSnapshot")
	countByKeyIDSQL  = queries.Get("CountByKeyID")
	pinnedSQL        = queries.Get("Pinned")
	sentByVersionSQL = queries.Get("SentByVersion")
	weekPinsSQL      = queries.Get("WeekPins")
	repinSQL         = queries.Get("Repin")
	observedKeysSQL  = queries.Get("ObservedKeys")
)

// busyTimeout is how long a writer waits for another process's write lock.
const busyTimeout = 30 * time.Second

// sqliteDSN is the modernc.org/sqlite connection string for path. The
// journal mode is not in it: WAL is a property of the file, set once by
// Migrate under the migration lock, because two processes switching a new
// file to WAL at the same moment can fail with SQLITE_BUSY.
func sqliteDSN(path, txlock string, busy time.Duration) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "synchronous(FULL)")
	q.Set("_txlock", txlock)
	return "file:" + path + "?" + q.Encode()
}

// Config configures a Store. The zero value opens DefaultPath.
type Config struct {
	// Path is the SQLite file; default DefaultPath.
	Path string
	// Now is the caller's clock; default time.Now. The times the store
	// returns for its caller to compare (a lease's end, a next attempt)
	// are on it; leases and retries are decided by the ledger's clock
	// (see ledger.CallTimes).
	Now func() time.Time
	// LedgerNow stands in for the database's clock, for tests that move
	// time (River's stubbed time): nil, as every command leaves it, uses
	// SQLite's unixepoch() for every lease and retry decision and every
	// time stamped on a receipt.
	LedgerNow func() time.Time
	// Logger receives migration progress; default discards.
	Logger *slog.Logger
}

// DefaultPath is the SQLite file used when Config.Path is empty.
const DefaultPath = "./digest.db"

func (c Config) withDefaults() Config {
	if c.Path == "" {
		c.Path = DefaultPath
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Open opens (creating if needed) the SQLite file cfg.Path.
func Open(ctx context.Context, cfg Config) (_ *Store, err error) {
	defer classify(&err)
	cfg = cfg.withDefaults()
	if strings.ContainsAny(cfg.Path, "?#") {
		return nil, fmt.Errorf("%w: sqlite path %q may not contain '?' or '#'", ledger.ErrInvalid, cfg.Path)
	}
	db, err := sql.Open("sqlite", sqliteDSN(cfg.Path, "immediate", busyTimeout))
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", cfg.Path, err)
	}
	// One connection: this process's writers queue in database/sql rather
	// than spin on SQLite's busy handler.
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", cfg.Path, err)
	}
	return &Store{db: db, stmts: newStmtCache(), path: cfg.Path, now: cfg.Now, ledgerNow: cfg.LedgerNow, log: cfg.Logger}, nil
}

// Close closes the database.
func (s *Store) Close() error { return errors.Join(s.stmts.close(), s.db.Close()) }

// Migrate applies pending migrations with goose, holding an exclusive lock
// on the companion file PATH-migrate-lock so that two processes migrating
// the same file take turns.
func (s *Store) Migrate(ctx context.Context) error { return s.migrateTo(ctx, migrate.Latest) }

// MigrateDownTo rolls the schema back to version, under Migrate's lock,
// unless receipts are claimed under live leases (liveClaims).
func (s *Store) MigrateDownTo(ctx context.Context, version int64) error {
	if err := s.liveClaims(ctx); err != nil {
		return err
	}
	return s.migrateTo(ctx, version)
}

func (s *Store) migrateTo(ctx context.Context, version int64) (err error) {
	defer classify(&err)
	db, err := sql.Open("sqlite", sqliteDSN(s.path, "immediate", busyTimeout))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer db.Close()
	locker := &fileLocker{path: s.path + "-migrate-lock"}
	return migrate.To(ctx, goose.DialectSQLite3, db, migrations.SQLite(), s.log, version, goose.WithSessionLocker(locker))
}

// fileLocker is a goose session locker for SQLite: an exclusive
// transaction on a separate small database file. The operating system
// releases it if the process dies.
type fileLocker struct {
	path string
	db   *sql.DB
	tx   *sql.Tx
}

// SessionLock waits up to ten minutes for the lock, then switches the
// ledger file (goose's conn) to WAL mode.
func (l *fileLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", (10*time.Minute).Milliseconds()))
	q.Set("_txlock", "exclusive")
	db, err := sql.Open("sqlite", "file:"+l.path+"?"+q.Encode())
	if err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		db.Close()
		return fmt.Errorf("migration lock: %w", err)
	}
	l.db, l.tx = db, tx
	if err := setWAL(ctx, conn); err != nil {
		return errors.Join(fmt.Errorf("migration: %w", err), l.SessionUnlock(ctx, conn))
	}
	return nil
}

// SessionUnlock releases the lock.
func (l *fileLocker) SessionUnlock(context.Context, *sql.Conn) error {
	if l.tx == nil {
		return nil
	}
	err := errors.Join(l.tx.Rollback(), l.db.Close())
	l.db, l.tx = nil, nil
	return err
}

// setWAL switches the file to WAL mode unless it is in it already.
func setWAL(ctx context.Context, conn *sql.Conn) error {
	var mode string
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("read journal mode: %w", err)
	}
	if strings.EqualFold(mode, "wal") {
		return nil
	}
	// The switch needs the file to itself for a moment; a connection just
	// opening (another store, another process) can make it fail at once
	// with SQLITE_BUSY rather than wait, so try again for a few seconds.
	for range 100 {
		err := conn.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode)
		if !isBusy(err) {
			if err != nil {
				return fmt.Errorf("set WAL mode: %w", err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("set WAL mode: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return errors.New("set WAL mode: database stayed busy")
}

// write runs fn in one BEGIN IMMEDIATE transaction.
func (s *Store) write(ctx context.Context, fn func(sqliteTx) error) error {
	defer s.stmts.prepareWanted(ctx, s.db)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(sqliteTx{tx, s.stmts}); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// nowUTC is the caller's clock at the ledger's microsecond precision.
func (s *Store) nowUTC() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// ledgerTimeSQL is SQLite's own clock, in microseconds since the epoch
// (SQLite keeps milliseconds).
const ledgerTimeSQL = "SELECT CAST(unixepoch('subsec') * 1000000 AS INTEGER)"

// ledgerTime is the ledger's clock, read in tx: SQLite's own, the one
// every lease and retry is decided by (see ledger.CallTimes), or its
// stand-in in tests (Config.LedgerNow). Read after BEGIN IMMEDIATE took
// the write lock, it is no earlier than any time another writer stamped.
func (s *Store) ledgerTime(ctx context.Context, tx sqliteTx) (time.Time, error) {
	if s.ledgerNow != nil {
		return s.ledgerNow().UTC().Truncate(time.Microsecond), nil
	}
	var us int64
	if err := tx.QueryRowContext(ctx, ledgerTimeSQL).Scan(&us); err != nil {
		return time.Time{}, fmt.Errorf("read the ledger's clock: %w", err)
	}
	return time.UnixMicro(us).UTC(), nil
}

// writeAt runs fn in one BEGIN IMMEDIATE transaction at the ledger's
// time (ledgerTime).
func (s *Store) writeAt(ctx context.Context, fn func(tx sqliteTx, now time.Time) error) error {
	return s.write(ctx, func(tx sqliteTx) error {
		now, err := s.ledgerTime(ctx, tx)
		if err != nil {
			return err
		}
		return fn(tx, now)
	})
}

// fromMicros decodes a stored time: microseconds since the epoch, NULL
// for none.
func fromMicros(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.UnixMicro(n.Int64).UTC()
}

// PinSnapshot stores proposed as what pin fixes if the pin is new, and
// returns the stored values with the week's receipts counted by key id.
// A pin made before zones and key ids were pinned (NULL) adopts this
// run's, once; as_of never changes.
func (s *Store) PinSnapshot(ctx context.Context, pin digest.SnapshotPin, proposed digest.WeekPin) (_ digest.WeekPin, err error) {
	defer classify(&err)
	wp := digest.WeekPin{ReceiptsByKeyID: map[string]int64{}}
	err = s.write(ctx, func(tx sqliteTx) error {
		var asOf, from sql.NullInt64
		err := tx.QueryRowContext(ctx, pinSnapshotSQL, pin.Type, pin.Week.String(), pin.Version, proposed.AsOf.UnixMicro(), s.nowUTC().UnixMicro(),
			proposed.Zone, proposed.KeyID, proposed.Partial, proposed.ResentAsNewVersion).Scan(&asOf, &wp.Zone, &wp.KeyID, &wp.Partial, &from, &wp.ResentAsNewVersion)
		if err != nil {
			return err
		}
		wp.AsOf, wp.RepinnedFrom = fromMicros(asOf), fromMicros(from)
		rows, err := tx.QueryContext(ctx, countByKeyIDSQL, pin.Week.String())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				kid string
				n   int64
			)
			if err := rows.Scan(&kid, &n); err != nil {
				return err
			}
			wp.ReceiptsByKeyID[kid] = n
		}
		return rows.Err()
	})
	if err != nil {
		return digest.WeekPin{}, fmt.Errorf("pin snapshot %s/%s/%s: %w", pin.Type, pin.Week, pin.Version, err)
	}
	return wp, nil
}

// jsonKeys is keys as a JSON array, the argument of the statements that
// take a list of candidate keys (json_each).
func jsonKeys(keys []digest.Key) string {
	b, err := json.Marshal(rules.KeyStrings(keys))
	if err != nil {
		panic(err) // unreachable: a []string always marshals
	}
	return string(b)
}

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

// queryAll runs query and scans every row with scan.
func queryAll[T any](ctx context.Context, db *sql.DB, scan func(rowScanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var list []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		list = append(list, v)
	}
	return list, rows.Err()
}
