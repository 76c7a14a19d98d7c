package faults

import (
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/e2etest"
)

func TestMain(m *testing.M) { e2etest.Main(m) }

// A past week: every seeded row is recorded before the snapshot is pinned.
var week40 = digest.ISOWeek{Year: 2026, Week: 40}

const week40s = "2026-W40"
