package sqlite

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/weeklydigest/digest/ledger"
)

// Durability reads synchronous and journal_mode on the store's connection
// (its only one: Open sets synchronous FULL on it; Migrate puts the file in
// WAL mode).
func (s *Store) Durability(ctx context.Context) (_ ledger.Settings, err error) {
	defer classify(&err)
	var sync int
	var mode string
	// A read first: a connection learns that another one put the file in
	// WAL mode only when it next reads the file.
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&n); err != nil {
		return nil, fmt.Errorf("read durability settings: %w", err)
	}
	if err := s.db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		return nil, fmt.Errorf("read durability settings: %w", err)
	}
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return nil, fmt.Errorf("read durability settings: %w", err)
	}
	return durabilitySettings(sync, mode), nil
}

// synchronousNames are PRAGMA synchronous's values by number.
var synchronousNames = []string{"OFF", "NORMAL", "FULL", "EXTRA"}

// durabilitySettings judges synchronous (a number) and journal_mode.
func durabilitySettings(sync int, journalMode string) ledger.Settings {
	name := strconv.Itoa(sync)
	if sync >= 0 && sync < len(synchronousNames) {
		name = synchronousNames[sync]
	}
	ss := ledger.Settings{
		{Name: "synchronous", Value: name},
		{Name: "journal_mode", Value: strings.ToLower(journalMode)},
	}
	if sync < 2 {
		// In WAL mode NORMAL survives a crash of the process but not of
		// the machine: the last commits can roll back on power loss.
		ss[0].Unsafe, ss[0].Want = "a commit can be lost when the machine loses power", "FULL"
	}
	switch ss[1].Value {
	case "off", "memory":
		ss[1].Unsafe, ss[1].Want = "a crash mid-transaction can corrupt the file", "wal"
	}
	return ss
}
