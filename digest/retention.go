package digest

import "time"

// PruneTombstone is what "digest prune" leaves of a (type, week, version)
// whose receipts it deleted, some or all: those receipts were the only
// record that their digests went out, so a run of the week would send them
// again. A run refuses such a week unless run.Config.ResendPrunedWeek.
type PruneTombstone struct {
	// Pin names the snapshot. Receipts carry no type or version (the key
	// is an HMAC), so a prune writes one tombstone per snapshot pin of the
	// week; Type and Version are empty for a week that had no pin, and
	// such a tombstone stands for every type and version of the week.
	Pin            SnapshotPin
	ReceiptsPruned int64 // over every prune of the week
	FirstPrunedAt  time.Time
	LastPrunedAt   time.Time
}
