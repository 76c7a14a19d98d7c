package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// situation is a receipt state the walk sets up, with the conditions that
// hold for it.
type situation struct {
	name  string
	state digest.State // "" no receipt
	holds []ledger.Condition
	// setup brings the receipt of k into the state and returns the last
	// claim (the holder's fence; zero when nothing was claimed).
	setup func(t *testing.T, s ledger.Store, k []digest.Key) digest.ClaimResult
	// after moves the clock once every receipt of the store is set up.
	after time.Duration
}

var situations = []situation{
	{"absent", "", nil, func(*testing.T, ledger.Store, []digest.Key) digest.ClaimResult { return digest.ClaimResult{} }, 0},
	{"claimed, lease live", digest.StateClaimed, []ledger.Condition{ledger.LeaseLive}, claimOnly, 0},
	{"claimed, lease expired", digest.StateClaimed, []ledger.Condition{ledger.LeaseExpired}, claimOnly, 2 * time.Minute},
	{"claimed, send started, lease expired", digest.StateClaimed, []ledger.Condition{ledger.LeaseExpired, ledger.SendStarted, ledger.StartExpired},
		func(t *testing.T, s ledger.Store, k []digest.Key) digest.ClaimResult {
			c := claimOnly(t, s, k)
			if err := start1(t, s, c.Key, c.Token); err != nil {
				t.Fatal(err)
			}
			return c
		}, 2 * time.Minute},
	{"sent", digest.StateSent, nil, finishedAs(digest.StateSent, 0), 0},
	{"retryable, due", digest.StateRetryable, []ledger.Condition{ledger.Due}, finishedAs(digest.StateRetryable, 0), 0},
	{"retryable, not due", digest.StateRetryable, []ledger.Condition{ledger.NotDue}, finishedAs(digest.StateRetryable, time.Hour), 0},
	{"failed", digest.StateFailed, nil, finishedAs(digest.StateFailed, 0), 0},
	{"held", digest.StateHeld, nil, finishedAs(digest.StateHeld, 0), 0},
	{"quarantined, never sent", digest.StateQuarantined, []ledger.Condition{ledger.NeverSent},
		func(t *testing.T, s ledger.Store, k []digest.Key) digest.ClaimResult {
			c := claimOnly(t, s, k)
			wantOutcome(t, claim1(t, s, req(k, "fp2")), digest.OutcomeQuarantined)
			return c
		}, 0},
	{"quarantined, was sent", digest.StateQuarantined, []ledger.Condition{ledger.WasSent},
		func(t *testing.T, s ledger.Store, k []digest.Key) digest.ClaimResult {
			c := send(t, s, k, "ref-sent")
			wantOutcome(t, claim1(t, s, req(k, "fp2")), digest.OutcomeQuarantined)
			return c
		}, 0},
	{"acknowledged, was sent", digest.StateAcknowledged, []ledger.Condition{ledger.WasSent},
		func(t *testing.T, s ledger.Store, k []digest.Key) digest.ClaimResult {
			c := send(t, s, k, "ref-sent")
			wantOutcome(t, claim1(t, s, req(k, "fp2")), digest.OutcomeQuarantined)
			if err := s.Acknowledge(context.Background(), c.Key, false, walkBy); err != nil {
				t.Fatal(err)
			}
			return c
		}, 0},
	{"acknowledged, never sent", digest.StateAcknowledged, []ledger.Condition{ledger.NeverSent},
		func(t *testing.T, s ledger.Store, k []digest.Key) digest.ClaimResult {
			c := claimOnly(t, s, k)
			wantOutcome(t, claim1(t, s, req(k, "fp2")), digest.OutcomeQuarantined)
			if err := s.Acknowledge(context.Background(), c.Key, true, walkBy); err != nil {
				t.Fatal(err)
			}
			return c
		}, 0},
}

func claimOnly(t *testing.T, s ledger.Store, k []digest.Key) digest.ClaimResult {
	t.Helper()
	return mustClaim(t, s, req(k, "fp1"))
}

// finishedAs claims and finishes as state, retryable ones due after next.
func finishedAs(state digest.State, next time.Duration) func(*testing.T, ledger.Store, []digest.Key) digest.ClaimResult {
	return func(t *testing.T, s ledger.Store, k []digest.Key) digest.ClaimResult {
		t.Helper()
		c := claimOnly(t, s, k)
		f := digest.Finish{Key: c.Key, Token: c.Token, State: state, RunID: "run-1", Reason: "set up as " + string(state)}
		if state == digest.StateSent {
			f.ProviderRef, f.Reason = "ref-setup", ""
		}
		if state == digest.StateRetryable {
			f.NextAttempt = c.LeaseExpires.Add(-time.Minute).Add(next)
		}
		if err := finish1(t, s, f); err != nil {
			t.Fatal(err)
		}
		return c
	}
}

var walkBy = ledger.Action{By: "walker", Reason: "transition walk"}

// apply causes trigger on the receipt under k, whose last claim was c.
// It returns the history text a transition would write, and the error of
// a refusal (nil when the call was refused in its result instead).
func apply(ctx context.Context, s ledger.Store, k []digest.Key, c digest.ClaimResult, trigger ledger.Trigger, now time.Time) (detail string, err error) {
	key := c.Key
	if key == "" {
		key = k[0]
	}
	finish := func(state digest.State) (string, error) {
		f := digest.Finish{Key: key, Token: c.Token, State: state, RunID: "run-walk", Reason: "walked to " + string(state)}
		if state == digest.StateSent {
			f.ProviderRef, f.Reason = "ref-walk", ""
		}
		errs, err := s.Finish(ctx, []digest.Finish{f})
		if err == nil {
			err = errs[0]
		}
		return ledger.FinishDetail(f), err
	}
	switch trigger {
	case ledger.TriggerClaim, ledger.TriggerClaimOtherFingerprint:
		fp := "fp1"
		if trigger == ledger.TriggerClaimOtherFingerprint {
			fp = "fp2"
		}
		// The history text depends on where the receipt came from: the
		// walk works it out with ledger.ClaimHistory.
		_, err := s.Claim(ctx, []digest.ClaimRequest{req(k, fp)})
		return "", err
	case ledger.TriggerStartSending:
		errs, err := s.StartSending(ctx, []digest.Fence{{Key: key, Token: c.Token}})
		if err == nil {
			err = errs[0]
		}
		return ledger.HistorySendStarted, err
	case ledger.TriggerRenew:
		_, errs, err := s.Renew(ctx, []digest.Fence{{Key: key, Token: c.Token}}, time.Minute)
		if err == nil {
			err = errs[0]
		}
		return "", err
	case ledger.TriggerFinishSent:
		return finish(digest.StateSent)
	case ledger.TriggerFinishRetryable:
		return finish(digest.StateRetryable)
	case ledger.TriggerFinishFailed:
		return finish(digest.StateFailed)
	case ledger.TriggerFinishHeld:
		return finish(digest.StateHeld)
	case ledger.TriggerRelease:
		before, _, _ := s.Show(ctx, key)
		_, detail, _ := ledger.DecideRelease(before, walkBy)
		return detail, s.Release(ctx, key, walkBy)
	case ledger.TriggerAcknowledge, ledger.TriggerAcknowledgeUnsent:
		unsent := trigger == ledger.TriggerAcknowledgeUnsent
		before, _, _ := s.Show(ctx, key)
		detail, _ := ledger.DecideAcknowledge(before, unsent, walkBy)
		return detail, s.Acknowledge(ctx, key, unsent, walkBy)
	case ledger.TriggerMarkSent:
		return ledger.MarkSentDetail(walkBy, "ref-operator"), s.MarkSent(ctx, key, "ref-operator", walkBy)
	case ledger.TriggerPrune, ledger.TriggerPruneHeldAndQuarantined:
		all := trigger == ledger.TriggerPruneHeldAndQuarantined
		_, err := s.Prune(ctx, ledger.PruneRequest{Before: now.Add(-time.Hour), IncludeHeld: all, IncludeQuarantined: all})
		return ledger.PruneEndReason, err // of a claim it ends
	case ledger.TriggerEndClaim:
		const reason = "walked: no run will send it"
		_, err := s.EndClaims(ctx, []digest.EndClaim{{Keys: k, Week: week, Reason: reason, RunID: "run-walk"}})
		return reason, err
	}
	return "", fmt.Errorf("the walk has no way to cause %q", trigger)
}

// testTransitions walks the state diagram, ledger.Transitions: every
// situation × every trigger, on a receipt of its own. Where the diagram
// has an edge the receipt must reach its To state with one new history
// entry saying the defined text, a stored row or one told by the receipt
// as the edge's Row says; everywhere else it must stay as it was, with no
// new history entry.
func testTransitions(t *testing.T, be Driver) {
	ctx := context.Background()
	for _, sit := range situations {
		t.Run(sit.name, func(t *testing.T) {
			t.Parallel()
			// A prune removes every prunable receipt of the store, and
			// moves the clock: each prune trigger gets a store of its own.
			groups := [][]ledger.Trigger{nil}
			for _, tr := range ledger.Triggers {
				if tr == ledger.TriggerPrune || tr == ledger.TriggerPruneHeldAndQuarantined {
					groups = append(groups, []ledger.Trigger{tr})
				} else {
					groups[0] = append(groups[0], tr)
				}
			}
			for _, triggers := range groups {
				walk(ctx, t, be, sit, triggers)
			}
		})
	}
}

func walk(ctx context.Context, t *testing.T, be Driver, sit situation, triggers []ledger.Trigger) {
	s, clk, _ := fresh(t, be)
	type subject struct {
		keys  []digest.Key
		claim digest.ClaimResult
	}
	subjects := make([]subject, len(triggers))
	for i, tr := range triggers {
		k := keys(t, fmt.Sprintf("%s/%s", sit.name, tr))
		subjects[i] = subject{k, sit.setup(t, s, k)}
	}
	clk.Advance(sit.after)
	holds := append([]ledger.Condition{ledger.NotRunSince}, sit.holds...)
	if len(triggers) == 1 && (triggers[0] == ledger.TriggerPrune || triggers[0] == ledger.TriggerPruneHeldAndQuarantined) {
		clk.Advance(old)
		// Old enough to prune, a live lease has expired and a retry
		// is due.
		holds = slices.Clone(holds)
		for i, c := range holds {
			switch c {
			case ledger.LeaseLive:
				holds[i] = ledger.LeaseExpired
			case ledger.NotDue:
				holds[i] = ledger.Due
			}
		}
	}
	for i, trigger := range triggers {
		sub := subjects[i]
		key := sub.claim.Key
		if key == "" {
			key = sub.keys[0]
		}
		before, history := showOrAbsent(ctx, t, s, key)
		if sit.state != before.State {
			t.Fatalf("%s: set up as %q, is %q", sit.name, sit.state, before.State)
		}
		want, moves := ledger.Next(sit.state, holds, trigger)
		now := clk.Now()
		detail, err := apply(ctx, s, sub.keys, sub.claim, trigger, now)
		if moves && err != nil {
			t.Errorf("%s, %s: %v, want → %q", sit.name, trigger, err, want.To)
			continue
		}
		if err != nil && !refusal(err) {
			t.Errorf("%s, %s: %v", sit.name, trigger, err)
			continue
		}
		after, events := showOrAbsent(ctx, t, s, key)
		if after.State == "" && before.State == "" && trigger == ledger.TriggerClaim {
			t.Fatalf("%s, %s: no receipt after a claim", sit.name, trigger)
		}
		if !moves {
			if after.State != before.State || len(events) != len(history) {
				t.Errorf("%s, %s: %q → %q with %d new history rows; the diagram has no such edge",
					sit.name, trigger, before.State, after.State, len(events)-len(history))
			}
			continue
		}
		if after.State != want.To {
			t.Errorf("%s, %s: → %q, want %q", sit.name, trigger, after.State, want.To)
			continue
		}
		if want.To == "" {
			continue // pruned with its history
		}
		if trigger == ledger.TriggerRenew {
			if len(events) != len(history) || !after.LeaseExpires.Equal(now.Add(time.Minute)) {
				t.Errorf("%s, renew: lease until %v with %d new history rows, want %v and none",
					sit.name, after.LeaseExpires, len(events)-len(history), now.Add(time.Minute))
			}
			continue
		}
		if len(events) != len(history)+1 {
			t.Errorf("%s, %s: %d new history rows, want 1", sit.name, trigger, len(events)-len(history))
			continue
		}
		ev := events[len(events)-1]
		if ev.FromReceipt != (want.Row == ledger.RowTold) {
			t.Errorf("%s, %s: history entry told by the receipt: %v; the diagram says %q", sit.name, trigger, ev.FromReceipt, want.Row)
		}
		if trigger == ledger.TriggerClaim || trigger == ledger.TriggerClaimOtherFingerprint {
			detail = ledger.ClaimHistory(sit.state, want.To, after.MaybeSent && want.To == digest.StateClaimed)
		}
		if ev.From != sit.state || ev.To != want.To || ev.Detail != detail {
			t.Errorf("%s, %s: history %q → %q %q, want %q → %q %q", sit.name, trigger, ev.From, ev.To, ev.Detail, sit.state, want.To, detail)
		}
		if want.History != "" && (len(ev.Detail) < len(want.History) || ev.Detail[:len(want.History)] != want.History) {
			t.Errorf("%s, %s: history %q, want it to start with the diagram's %q", sit.name, trigger, ev.Detail, want.History)
		}
	}
}

// showOrAbsent returns the receipt (State "" when there is none) and its history.
func showOrAbsent(ctx context.Context, t *testing.T, s ledger.Store, key digest.Key) (ledger.Receipt, []ledger.Event) {
	t.Helper()
	r, events, err := s.Show(ctx, key)
	if errors.Is(err, ledger.ErrNotFound) {
		return ledger.Receipt{}, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return r, events
}

// refusal reports an error by which the ledger refuses a trigger the
// diagram has no edge for.
func refusal(err error) bool {
	// A renewal of a key with no receipt is ErrStaleClaim on SQLite but
	// ErrNotRenewed on PostgreSQL (its statement cannot tell a missing row
	// from a locked one); a run never renews a receipt it has not claimed.
	return errors.Is(err, digest.ErrStaleClaim) || errors.Is(err, digest.ErrNotRenewed) || errors.Is(err, ledger.ErrWrongState) ||
		errors.Is(err, ledger.ErrWasSent) || errors.Is(err, ledger.ErrNotSent) || errors.Is(err, ledger.ErrNotFound)
}
