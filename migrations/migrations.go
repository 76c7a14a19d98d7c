// Package migrations holds the ledger's numbered SQL migrations, one
// directory per dialect, embedded in the binary. Package ledger applies them
// with goose (see postgres.Store.Migrate and sqlite.Store.Migrate in ledger/).
//
// Files are named NNNNN_name.sql and carry goose's "-- +goose Up" and
// "-- +goose Down" sections. A migration, once released, is never edited:
// add a new file instead.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// Postgres returns the PostgreSQL migrations, rooted at their directory.
func Postgres() fs.FS { return sub("postgres") }

// SQLite returns the SQLite migrations, rooted at their directory.
func SQLite() fs.FS { return sub("sqlite") }

func sub(dir string) fs.FS {
	f, err := fs.Sub(files, dir)
	if err != nil {
		// Unreachable: dir is a constant embedded above.
		panic("migrations: " + err.Error())
	}
	return f
}
