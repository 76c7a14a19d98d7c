package ledgertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// RecordRunEnd keeps the last run's end per pin; LastRun reads it back.
func testRecordRunEnd(t *testing.T, be Driver) {
	s, clk, _ := fresh(t, be)
	ctx := context.Background()
	pin := digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v3"}
	other := digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v4"}
	if _, ok, err := s.LastRun(ctx, pin); err != nil || ok {
		t.Fatalf("LastRun before any run: %v, %v; want none", ok, err)
	}
	start := clk.Now()
	observe := ledger.RunEnd{RunID: "r1", Mode: "observe", ExitCode: 0, StartedAt: start, EndedAt: start.Add(time.Minute)}
	if err := s.RecordRunEnd(ctx, pin, observe); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.LastRun(ctx, pin)
	if err != nil || !ok || got != observe {
		t.Fatalf("LastRun = %+v, %v, %v; want %+v", got, ok, err, observe)
	}
	enforce := ledger.RunEnd{RunID: "r2", Mode: "enforce", Shard: "0/2", ExitCode: 3,
		StartedAt: start.Add(2 * time.Minute), EndedAt: start.Add(3*time.Minute + 1500*time.Nanosecond)}
	if err := s.RecordRunEnd(ctx, pin, enforce); err != nil {
		t.Fatal(err)
	}
	got, _, err = s.LastRun(ctx, pin)
	enforce.EndedAt = enforce.EndedAt.Truncate(time.Microsecond) // the ledger's precision
	if err != nil || got != enforce {
		t.Fatalf("LastRun after a second run = %+v, %v; want %+v", got, err, enforce)
	}
	if _, ok, err := s.LastRun(ctx, other); err != nil || ok {
		t.Fatalf("LastRun of another version: %v, %v; want none", ok, err)
	}
	if err := s.RecordRunEnd(ctx, pin, ledger.RunEnd{Mode: "enforce", EndedAt: start}); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("RecordRunEnd without a run id: %v; want ErrInvalid", err)
	}
}
