package faults

import (
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/e2etest"
)

// The fault and bad-input suites scan every log record of every command
// for the addresses their tests used (e2etest.ScanLogs).
func TestMain(m *testing.M) {
	e2etest.ScanLogs = true
	e2etest.Main(m)
}

// A past week: every seeded row is recorded before the snapshot is pinned.
var week40 = digest.ISOWeek{Year: 2026, Week: 40}

const week40s = "2026-W40"
