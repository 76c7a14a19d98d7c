package ledger

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotDurable: the ledger's database is set up so that a receipt it
// committed may be gone after a crash of the database (server or machine),
// and a digest recorded as sent could then be sent again. The error names
// the setting; a run refuses to send until it is changed.
var ErrNotDurable = errors.New("the ledger's database cannot keep a committed receipt across a crash")

// Setting is one database setting a committed receipt's survival depends
// on, as the store's own connection sees it.
type Setting struct {
	Name  string // as the database spells it: fsync, synchronous_commit, journal_mode...
	Value string // as the database reports it
	// Unsafe, when not empty, says why Value can lose a committed receipt;
	// Want is the value to set instead.
	Unsafe, Want string
}

// Settings are a store's durability settings, in a fixed order.
type Settings []Setting

// String lists the settings as name=value pairs, for the log.
func (ss Settings) String() string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = s.Name + "=" + s.Value
	}
	return strings.Join(parts, " ")
}

// Err returns ErrNotDurable naming every unsafe setting, or nil.
func (ss Settings) Err() error {
	var bad []string
	for _, s := range ss {
		if s.Unsafe != "" {
			bad = append(bad, fmt.Sprintf("%s = %s (%s; set %s = %s)", s.Name, s.Value, s.Unsafe, s.Name, s.Want))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrNotDurable, strings.Join(bad, "; "))
}
