package ledger

import (
	"errors"
	"fmt"
)

// Schema is the ledger's migration version against the one this binary's
// migrations end at.
type Schema struct {
	Have int64 // the highest migration applied to the database; 0: none
	Want int64 // the last migration this binary carries
}

// ErrSchemaBehind: the ledger's schema lacks migrations this binary needs.
// "digest migrate" applies them; a retry after it succeeds.
var ErrSchemaBehind = errors.New("the ledger's schema is older than this binary needs")

// ErrSchemaAhead: the ledger has migrations this binary does not know (a
// newer binary migrated it). A command that sends or changes the ledger
// refuses it (unless told otherwise: --allow-newer-schema); one that only
// reads says so in a warning.
var ErrSchemaAhead = errors.New("this binary is older than the ledger schema")

// ErrSchemaUnreadable: the role may not read the migration version (a job
// role granted before the check existed lacks SELECT on goose_db_version).
// Commands go on with a warning.
var ErrSchemaUnreadable = errors.New("the ledger's migration version cannot be read by this role")

// ErrLiveClaims: migrate --down-to was asked while a run holds live claims.
var ErrLiveClaims = errors.New("claims are live: a run is sending")

// Err says, in words, why this binary cannot use the schema or may not
// know all of it, or nil.
func (s Schema) Err() error {
	switch {
	case s.Have < s.Want:
		return fmt.Errorf("%w: it is at migration %d, this binary needs %d: run \"digest migrate\" (as the schema owner) first", ErrSchemaBehind, s.Have, s.Want)
	case s.Have > s.Want:
		return fmt.Errorf("%w: the ledger is at migration %d, this binary knows migrations up to %d: run the binary that migrated it, or roll the schema back with that binary's \"digest migrate --down-to %d\"", ErrSchemaAhead, s.Have, s.Want, s.Want)
	}
	return nil
}
