package run_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/run"
)

var runPin = digest.SnapshotPin{Type: "weekly_activity", Week: runWeek, Version: "v1"}

func (f *fixture) setNow(t time.Time) {
	f.clock.mu.Lock()
	f.clock.now = t
	f.clock.mu.Unlock()
}

func (f *fixture) pinned() (digest.WeekPin, bool) {
	f.t.Helper()
	wp, ok, err := f.store.Pinned(context.Background(), runPin)
	if err != nil {
		f.t.Fatal(err)
	}
	return wp, ok
}

// Issue 19: an observe run of a week that has not ended pinned its cutoff
// at "now" for every later run. An observe run never pins; a run that
// sends pins the week's end plus the settle time, whenever it runs.
func TestObserveNeverPinsAndTheCutoffIsTheWeeksEndPlusSettle(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 30)
	p := newProvider()
	end := runWeek.End(time.UTC)
	f.setNow(end.Add(-48 * time.Hour)) // Friday
	if sum := f.run(f.runner(p, p, func(c *run.Config) { c.Mode = run.ModeObserve })); sum.Observed == 0 {
		t.Fatalf("observe: %+v", sum)
	}
	if wp, ok := f.pinned(); ok {
		t.Fatalf("observe run pinned the week at %v", wp.AsOf)
	}
	f.setNow(end.Add(30 * time.Hour)) // Monday 06:00
	if sum := f.run(f.runner(p, p, nil)); sum.Sent != f.want {
		t.Fatalf("run: %+v, want %d sent", sum, f.want)
	}
	wp, ok := f.pinned()
	if want := end.Add(run.DefaultSettle); !ok || !wp.AsOf.Equal(want) || wp.Partial {
		t.Fatalf("pin = %+v, %v; want as_of %v (end + settle), not partial", wp, ok, want)
	}
}

// A run that may send, before the week's end plus the settle time, is
// refused naming the end, and pins nothing; --early-cutoff pins now, marked
// partial.
func TestRunBeforeCutoffRefusedUnlessEarlyCutoff(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10)
	p := newProvider()
	end := runWeek.End(time.UTC)
	now := end.Add(run.DefaultSettle - time.Minute)
	f.setNow(now)
	_, err := f.runner(p, p, nil).Run(context.Background())
	var early *run.BeforeCutoffError
	if !errors.As(err, &early) || !errors.Is(err, run.ErrConfig) || !strings.Contains(err.Error(), end.Format(time.RFC3339)) ||
		!strings.Contains(err.Error(), "DIGEST_SETTLE=4h0m0s") {
		t.Fatalf("Run = %v, want a refusal naming the end %v and the settle time", err, end)
	}
	if _, ok := f.pinned(); ok || len(p.sends) != 0 {
		t.Fatalf("refused run pinned or sent (%d sends)", len(p.sends))
	}
	if sum := f.run(f.runner(p, p, func(c *run.Config) { c.EarlyCutoff = true })); sum.Sent != f.want {
		t.Fatalf("early run: %+v", sum)
	}
	if wp, ok := f.pinned(); !ok || !wp.Partial || !wp.AsOf.Equal(now) {
		t.Fatalf("pin = %+v, %v; want partial at %v", wp, ok, now)
	}
}
