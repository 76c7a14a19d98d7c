package run

import "github.com/weeklydigest/digest/digest"

// Verdict is what a run does with one source record.
type Verdict int

// Verdicts, in the order Classify tests them.
const (
	Send       Verdict = iota // built: claimed and sent (or observed)
	OtherShard                // another shard's customer: not counted
	Suppressed                // the customer unsubscribed: no claim, no receipt
	Invalid                   // digest.Build refused it (the error says why)
	Empty                     // no activity in the week, and empty digests are not sent
)

// Classify decides what a run does with rec: the read stage's filter, and
// what "digest status" counts as the digests a week should send. d is built
// when the verdict is Send or Empty; err is set when it is Invalid.
func Classify(rec digest.Record, spec digest.Spec, shard digest.Shard, sendEmpty bool) (d digest.Digest, v Verdict, err error) {
	switch {
	case !shard.Has(rec.Customer.ID):
		return d, OtherShard, nil
	case rec.Customer.Suppressed:
		return d, Suppressed, nil
	}
	if d, err = digest.Build(rec, spec); err != nil {
		return d, Invalid, err
	}
	if d.Empty() && !sendEmpty {
		return d, Empty, nil
	}
	return d, Send, nil
}
