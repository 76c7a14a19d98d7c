package ledger

import (
	"time"

	"github.com/weeklydigest/digest/digest"
)

// The ledger's clock decides every lease and retry: a claim's expiry is
// the ledger's time of the claim plus the lease the caller asks for, a
// claim is taken over when the ledger's time passes it, a renewal extends
// it from the ledger's time, and a retryable receipt is due when the
// ledger's time reaches its next attempt. The caller passes durations,
// never instants, so a process whose clock runs hours ahead can neither
// take over a live claim nor make its own outlive its lease, and one
// whose clock runs behind cannot keep a claim past its expiry.
//
// The times a store returns to its caller (digest.ClaimResult's
// LeaseExpires, NextAttempt and TakenOverAt, Renew's expiry) are on the
// caller's clock (Config.Now), converted by the offset between the two
// clocks read at the call (CallTimes): the caller compares them with its
// own clock, and a lease converted so ends no later than the ledger's
// (the caller's time is read before the ledger's).

// CallTimes are the two clocks of one store call: the ledger's, by which
// the call decides and stamps rows, and the caller's (Config.Now), read
// before the call reached the ledger.
type CallTimes struct {
	Ledger time.Time
	Caller time.Time
}

// ToCaller converts t, a time of the ledger's clock, to the caller's:
// the same distance from the call. The zero time stays zero.
func (c CallTimes) ToCaller(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return c.Caller.Add(t.Sub(c.Ledger)).UTC()
}

// Result converts the times of r that the caller compares with its own
// clock (the lease's end, the next attempt, the takeover) to the caller's
// clock; SentAt stays the ledger's record.
func (c CallTimes) Result(r digest.ClaimResult) digest.ClaimResult {
	r.LeaseExpires, r.NextAttempt, r.TakenOverAt = c.ToCaller(r.LeaseExpires), c.ToCaller(r.NextAttempt), c.ToCaller(r.TakenOverAt)
	return r
}

// Delay is how long after the caller's time of the call f's next attempt
// is (zero, due at once, when unset; negative when past): a Finish's
// next attempt travels to the ledger as this delay, which the ledger adds
// to its own clock.
func (c CallTimes) Delay(f digest.Finish) time.Duration {
	if f.NextAttempt.IsZero() {
		return 0
	}
	return f.NextAttempt.Sub(c.Caller)
}
