package run_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/run"
)

// Issue 35, defect 2: a run of v2 on a week sent under v1 resent every
// digest with no word. It is refused, naming v1 and how many it sent,
// before anything is pinned or claimed; an observe run warns and sends
// nothing; --resend-as-new-version sends it and records who and why on
// the pin, and a later run of v2 goes on without the flag.
func TestRunOfANewVersionOnASentWeekIsRefusedUnlessAsked(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 20)
	p := newProvider()
	version := func(v string, mod func(*run.Config)) *run.Runner {
		return f.runner(p, p, func(c *run.Config) {
			c.Spec.Version = v
			if mod != nil {
				mod(c)
			}
		})
	}
	if sum := f.run(version("v1", nil)); sum.Sent != f.want {
		t.Fatalf("v1: %+v", sum)
	}

	sum, err := version("v2", nil).Run(context.Background())
	var vr *run.VersionResendError
	if !errors.As(err, &vr) || sum.Sent != 0 {
		t.Fatalf("v2 without the flag: %+v %v, want a *VersionResendError and nothing sent", sum, err)
	}
	if want := fmt.Sprintf("v1: %d sent or in flight", f.want); !strings.Contains(err.Error(), want) || vr.Others["v1"] != int64(f.want) {
		t.Fatalf("refusal %q (%v) does not say %q", err, vr.Others, want)
	}
	v2 := digest.SnapshotPin{Type: "weekly_activity", Week: runWeek, Version: "v2"}
	if _, pinned, err := f.store.Pinned(context.Background(), v2); err != nil || pinned {
		t.Fatalf("the refused run pinned v2: %v %v", pinned, err)
	}

	obs := f.run(version("v2", func(c *run.Config) { c.Mode = run.ModeObserve }))
	if accepted, _ := p.totals(); accepted != f.want || obs.Sent != 0 {
		t.Fatalf("observe run of v2: %+v, %d accepted", obs, accepted)
	}

	asked := f.run(version("v2", func(c *run.Config) {
		c.ResendAsNewVersion = &run.ResendAsNewVersion{By: "ana", Reason: "totals were wrong in v1"}
	}))
	if asked.Sent != f.want {
		t.Fatalf("v2 with --resend-as-new-version: %+v, want %d sent", asked, f.want)
	}
	wp, pinned, err := f.store.Pinned(context.Background(), v2)
	if err != nil || !pinned || !strings.Contains(wp.ResentAsNewVersion, `by "ana": totals were wrong in v1`) ||
		!strings.Contains(wp.ResentAsNewVersion, fmt.Sprintf("v1: %d sent", f.want)) {
		t.Fatalf("v2's pin: %+v %v %v, want who, why and v1's count", wp, pinned, err)
	}
	again := f.run(version("v2", nil))
	if again.Sent != 0 || again.Duplicates != f.want {
		t.Fatalf("v2 again, without the flag: %+v, want %d duplicates", again, f.want)
	}
	// v1 again: the week now holds v2's receipts; refused the same way.
	if _, err := version("v1", nil).Run(context.Background()); !errors.As(err, &vr) || vr.Others["v2"] != int64(f.want) {
		t.Fatalf("v1 after v2: %v", err)
	}
}

// Receipts made before receipts stored their version (an older binary's
// run of v1) are of an unknown version: with v1 pinned for the week, a run
// of v2 counts them as another version and is refused.
func TestRunOfANewVersionCountsReceiptsOfAnUnknownVersion(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 12)
	p := newProvider()
	if sum := f.run(f.runner(p, p, nil)); sum.Sent != f.want {
		t.Fatalf("v1: %+v", sum)
	}
	db, err := sql.Open("sqlite", "file:"+f.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE receipts SET digest_type = NULL, content_version = NULL`); err != nil {
		t.Fatal(err)
	}
	_, err = f.runner(p, p, func(c *run.Config) { c.Spec.Version = "v2" }).Run(context.Background())
	var vr *run.VersionResendError
	if !errors.As(err, &vr) || vr.Others[""] != int64(f.want) || !strings.Contains(err.Error(), "an unrecorded version") {
		t.Fatalf("v2 over receipts of an unknown version: %v, want a refusal counting %d", err, f.want)
	}
	if accepted, _ := p.totals(); accepted != f.want {
		t.Fatalf("%d accepted, want %d: the refused run sent", accepted, f.want)
	}
}
