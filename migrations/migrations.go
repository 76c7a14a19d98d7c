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
	"strconv"
	"strings"
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

// Last returns the number of the last migration in fsys (Postgres() or
// SQLite()): the schema version a binary carrying them expects. Names
// without a leading number are skipped; 0 when there is none.
func Last(fsys fs.FS) int64 {
	names, _ := fs.Glob(fsys, "*.sql")
	var last int64
	for _, n := range names {
		i := strings.IndexFunc(n, func(r rune) bool { return r < '0' || r > '9' })
		if i < 1 {
			continue
		}
		if v, err := strconv.ParseInt(n[:i], 10, 64); err == nil && v > last {
			last = v
		}
	}
	return last
}
