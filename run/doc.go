// Package run runs one week of the digest job: it streams the snapshot,
// claims each digest's key in the ledger, sends what it may and records
// every outcome, through retry passes until nothing is pending or the
// deadline comes. It depends only on package digest: the domain types and
// the ports (digest.Ledger, digest.Mailer, digest.Lookup, digest.Source)
// that the adapters implement.
//
// # Before the first claim
//
// A Runner refuses, before anything is claimed, a source that holds no
// customer at all (it would look like a week that was sent), a week whose
// receipts were pruned (*PrunedWeekError), and a run that would key the
// week differently from its first run: another time zone, or a keyring
// without a key id the week's receipts are stored under (checkWeekPin).
//
// # The pipeline
//
// One pass is one scan of the source, a pipeline of stages joined by bounded
// channels:
//
//	read → claim (batched) → start sending (batched) → send (concurrent) → finish (batched)
//
// Each stage runs in its own goroutine, so the claim of the next batch and
// the record of the last one overlap the sends of the current one: sending
// never waits for a ledger round trip. Memory is flat in the number of
// customers: at most a few batches are in flight. The reader hands the
// claim stage whole batches, and the senders add to the finisher's batch
// under a lock (doneQueue), so that those stages are woken once a batch,
// not once a digest. Summary.Stages says where each stage spent the run.
//
// # Crash windows
//
// What each queue holds on a crash decides what the next run does, so the
// queues are sized to the rules of the ledger:
//
//   - claimed, not yet marked as sending (the claimed queue): re-sent
//     without a look-up once their lease ends, since no send can have
//     started;
//   - marked as sending, not yet sent (the sends queue, and the marks
//     under way): at most two chunks of startChunk, so a crash leaves few
//     digests that the next run must look up at the provider (or hold for
//     an operator);
//   - sent, not yet recorded (the done queue: the batch being filled, the
//     one handed to the finisher, and the one being written): still marked
//     as sending, so each costs a look-up, never a duplicate; batchLinger
//     bounds how long a batch waits to fill.
//
// The claims taken ahead are a quarter lease's worth of sends (claimBatch),
// and their leases are renewed while they wait (renew), so a slow rate
// never lets a waiting claim expire under another run. A send starts only
// while its lease covers the mailer's worst case, and is cut off before the
// lease ends, so no other run can take a claim over while its send is under
// way.
//
// # Retry passes
//
// The first pass reads the whole source (of the shard). It remembers the
// customers it left pending, with when each comes due (pendingCustomers,
// at most MaxPendingCustomers ids; above that a retry pass reads the whole
// source again), and a retry pass reads only those due then
// (digest.SourceQuery.Customers) and claims only their keys. The run wakes
// for the first due row and takes those due within retryCoalesce after it.
// Keys another run holds are rechecked after busyRecheck while their
// holder may be finishing them (the first pass; a pass that found such
// keys settled), else at the lease expiry the claim reported.
//
// # Mail server failures
//
// Config.Preflight runs before the week is pinned. A send error of
// digest.SendFatal (from the preflight or any send) stops the run with
// ErrMailerUnusable; sends failing to connect (digest.KindConnect)
// circuitThreshold times in a row, or in every send of deadPassesToStop
// passes, stop it with ErrMailerUnreachable. The first failure of each
// kind is logged; all are counted in Summary.Failures.
//
// # Stopping
//
// Cancelling the context (SIGTERM) stops reading and claiming; a claim call
// under way finishes and its claims are given back, sends under way finish
// and their outcomes are recorded within Config.Grace, and the Summary
// is marked Interrupted.
package run
