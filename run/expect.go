package run

import "github.com/weeklydigest/digest/digest"

// Verdict is what a run does with one source record.
type Verdict int

// Verdicts, in the order VerdictOf tests them.
const (
	VerdictSend       Verdict = iota // built: claimed and sent (or observed)
	VerdictOtherShard                // another shard's customer: not counted
	VerdictSuppressed                // the customer unsubscribed: no claim, no receipt
	VerdictInvalid                   // digest.Build refused it (the error says why)
	VerdictEmpty                     // no activity in the week, and empty digests are not sent
)

// VerdictOf decides what a run does with rec: the read stage's filter, and
// what "digest status" counts as the digests a week should send. d is built
// when the verdict is Send or Empty; err is set when it is Invalid.
func VerdictOf(rec digest.Record, spec digest.Spec, shard digest.Shard, sendEmpty bool) (d digest.Digest, v Verdict, err error) {
	switch {
	case !shard.Has(rec.Customer.ID):
		return d, VerdictOtherShard, nil
	case rec.Customer.Suppressed:
		return d, VerdictSuppressed, nil
	}
	if d, err = digest.Build(rec, spec); err != nil {
		return d, VerdictInvalid, err
	}
	if d.Empty() && !sendEmpty {
		return d, VerdictEmpty, nil
	}
	return d, VerdictSend, nil
}
