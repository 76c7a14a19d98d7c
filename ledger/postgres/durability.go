package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/weeklydigest/digest/ledger"
)

// durableCommit reports whether synchronous_commit value v has a commit's
// WAL flushed to the server's disk before the commit is acknowledged:
// every value but off (local, remote_write, on, remote_apply).
func durableCommit(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "off", "false", "no", "0":
		return false
	}
	return true
}

// Durability reads fsync, full_page_writes and synchronous_commit on one of
// the pool's connections (Open sets synchronous_commit on every session;
// a connection pooler that drops startup parameters would show off here).
func (s *Store) Durability(ctx context.Context) (_ ledger.Settings, err error) {
	defer classify(&err)
	var fsync, fpw, sync string
	if err := s.pool.QueryRow(ctx, queries.Get("Durability")).Scan(&fsync, &fpw, &sync); err != nil {
		return nil, fmt.Errorf("read durability settings: %w", err)
	}
	return durabilitySettings(fsync, fpw, sync), nil
}

// durabilitySettings judges the three settings.
func durabilitySettings(fsync, fullPageWrites, synchronousCommit string) ledger.Settings {
	ss := ledger.Settings{
		{Name: "fsync", Value: fsync},
		{Name: "full_page_writes", Value: fullPageWrites},
		{Name: "synchronous_commit", Value: synchronousCommit},
	}
	if fsync != "on" {
		ss[0].Unsafe, ss[0].Want = "the server never forces its WAL to disk", "on"
	}
	if fullPageWrites != "on" {
		ss[1].Unsafe, ss[1].Want = "a page half written by a crash cannot be repaired from the WAL", "on"
	}
	if !durableCommit(synchronousCommit) {
		ss[2].Unsafe, ss[2].Want = "commits are acknowledged before their WAL is on disk; something between the job and the server dropped the job's setting", "on"
	}
	return ss
}
