package run

import (
	"context"
	"fmt"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// DefaultSettle is how long after a week's end its cutoff is taken by
// default: activity is recorded some time after it occurs (card
// settlements, batch imports), and a cutoff at the week's last second
// would leave the week's late-recorded rows out of its digests for good.
// Four hours covers a nightly import that finishes by 04:00 and stays
// below the shipped CronJob's Monday 06:00 (deploy's tests check it).
const DefaultSettle = 4 * time.Hour

// Cutoff is the as_of a week is pinned at: its end in loc plus settle.
// Two runs of the week at different times pin the same cutoff.
func Cutoff(w digest.ISOWeek, loc *time.Location, settle time.Duration) time.Time {
	return w.End(loc).Add(settle).UTC()
}

// EarlyPin reports whether wp cuts the week off before its end plus
// settle without saying so: a pin made by a version that pinned "now" at
// the week's first run, observe mode included. Its digests leave out the
// activity recorded after wp.AsOf; "digest repin" moves it.
func EarlyPin(wp digest.WeekPin, w digest.ISOWeek, loc *time.Location, settle time.Duration) bool {
	return !wp.Partial && wp.AsOf.Before(Cutoff(w, loc, settle))
}

// BeforeCutoffError refuses a run that may send a week whose cutoff (its
// end plus the settle time) is still ahead, without Config.EarlyCutoff.
// It wraps ErrConfig: nothing was pinned, claimed or sent.
type BeforeCutoffError struct {
	Week   digest.ISOWeek
	End    time.Time // the week's end, in its zone
	Settle time.Duration
}

func (e *BeforeCutoffError) Error() string {
	return fmt.Sprintf("week %s has not reached its cutoff: it ends at %s and its cutoff is the end plus the settle time (DIGEST_SETTLE=%s), %s; run it then, or pass --early-cutoff to pin a partial cutoff now on purpose",
		e.Week, e.End.Format(time.RFC3339), e.Settle, e.End.Add(e.Settle).Format(time.RFC3339))
}

func (e *BeforeCutoffError) Unwrap() error { return ErrConfig }

// pinReader reads a week's pin without making one (ledger.Store.Pinned).
type pinReader interface {
	Pinned(ctx context.Context, pin digest.SnapshotPin) (digest.WeekPin, bool, error)
}

// refuseBeforeCutoff refuses, before anything else, a run that may send
// a week whose cutoff is ahead, unless the early cutoff is intended.
func (r *Runner) refuseBeforeCutoff() error {
	cfg := &r.Config
	if cfg.Mode == ModeObserve || cfg.EarlyCutoff {
		return nil
	}
	if cutoff := Cutoff(cfg.Spec.Week, cfg.Spec.Location, cfg.Settle); cfg.Now().Before(cutoff) {
		return &BeforeCutoffError{Week: cfg.Spec.Week, End: cfg.Spec.Week.End(cfg.Spec.Location), Settle: cfg.Settle}
	}
	return nil
}

// weekPin returns the pin the run reads the week with. A run that may
// send pins the week's cutoff (end + settle), or now, marked partial,
// with EarlyCutoff before it; the first pin stands for every later run.
// An observe run never pins: it reads the week's pin if there is one, else
// the cutoff, or now if that is earlier.
//
// resent, when not empty, is recorded on the pin: this run resends the
// week under a new version on purpose (checkVersions).
func (r *Runner) weekPin(ctx context.Context, pin digest.SnapshotPin, resent string) (digest.WeekPin, error) {
	cfg := &r.Config
	now, cutoff := cfg.Now(), Cutoff(cfg.Spec.Week, cfg.Spec.Location, cfg.Settle)
	proposed := digest.WeekPin{AsOf: cutoff, Zone: cfg.Spec.Location.String(), KeyID: r.Keyring.CurrentID(), ResentAsNewVersion: resent}
	if now.Before(cutoff) {
		proposed.AsOf, proposed.Partial = now, true
	}
	if cfg.Mode == ModeObserve {
		pr, ok := r.Ledger.(pinReader)
		if !ok {
			return proposed, nil
		}
		wp, ok, err := pr.Pinned(ctx, pin)
		r.counters.ledgerCalls.Add(1)
		switch {
		case err != nil:
			return digest.WeekPin{}, fmt.Errorf("read the week's pin: %w", err)
		case !ok:
			return proposed, nil
		}
		// A pin from before zones and key ids were pinned: the next
		// enforce run adopts these, as this one reads.
		if wp.Zone == "" {
			wp.Zone = proposed.Zone
		}
		if wp.KeyID == "" {
			wp.KeyID = proposed.KeyID
		}
		return wp, nil
	}
	wp, err := r.Ledger.PinSnapshot(ctx, pin, proposed)
	r.counters.ledgerCalls.Add(1)
	if err != nil {
		return digest.WeekPin{}, fmt.Errorf("pin snapshot: %w", err)
	}
	return wp, nil
}

// warnCutoff logs what the run's cutoff leaves out of the week.
func (r *Runner) warnCutoff(ctx context.Context, wp digest.WeekPin) {
	cfg := &r.Config
	cutoff := Cutoff(cfg.Spec.Week, cfg.Spec.Location, cfg.Settle)
	week := cfg.Spec.Week.String()
	switch {
	case wp.Partial:
		cfg.Logger.WarnContext(ctx, "partial cutoff: the week is read as of before its end plus the settle time, on purpose (--early-cutoff); activity recorded later is not in its digests. After the cutoff: digest repin --week "+week,
			"week", week, "as_of", wp.AsOf, "cutoff", cutoff)
	case EarlyPin(wp, cfg.Spec.Week, cfg.Spec.Location, cfg.Settle):
		cfg.Logger.WarnContext(ctx, "early pin: the week was pinned before its end plus the settle time by an older run, and not marked partial; activity recorded after as_of is not in its digests. The way out: digest repin --week "+week+" (docs/operations.md)",
			"week", week, "as_of", wp.AsOf, "cutoff", cutoff)
	}
}
