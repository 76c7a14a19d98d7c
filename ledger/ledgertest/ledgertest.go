// Package ledgertest is the contract suite of the receipt ledger: the
// tests every store (ledger/postgres, ledger/sqlite) must pass, run by each
// store package's own tests through Run, as River's riverdrivertest is run
// by each of its drivers.
//
// A few tests read or write a store's database directly (to search every
// stored byte for customer data, or to write a row as an older schema
// did); they know the two databases by Database: URL for PostgreSQL, Path
// for SQLite.
package ledgertest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/ledger"
)

// Database names one database of a store: URL for PostgreSQL, Path for
// SQLite.
type Database struct {
	URL  string
	Path string
}

// Clocks are the clocks a store is opened with (its Config's Now and
// LedgerNow): nil ones are the store's defaults, the process's clock and
// the database's own.
type Clocks struct {
	Now, LedgerNow func() time.Time
}

// Driver is one store implementation, as the suite sees it.
type Driver struct {
	// Fresh returns a new, empty database that lives as long as t.
	Fresh func(t testing.TB) Database
	// Open opens the store on db with clocks, without migrating, failing
	// t if it cannot. What the driver built for it (a pool) is released
	// when t ends, after the store's Close.
	Open func(t testing.TB, db Database, clocks Clocks) ledger.Store
	// Pool, when set, returns a connection pool of its own on a PostgreSQL
	// database, closed when t ends, and also runs the tests of row locks
	// between concurrent transactions, which hold a transaction open
	// beside the store's own.
	Pool func(t testing.TB, db Database) *pgxpool.Pool
}

// test is one contract test.
type test struct {
	name string
	run  func(t *testing.T, d Driver)
}

// tests are the contract tests every store passes.
var tests = []test{
	{"BatchedEqualsSingle", testBatchedEqualsSingle},
	{"BulkActionsOnOneWeek", testBulkActionsOnOneWeek},
	{"SendStartedAtSurvivesTakeover", testSendStartedAtSurvivesTakeover},
	{"ClaimConcurrentConnections", testClaimConcurrentConnections},
	{"LeaseBlocksThenExpires", testLeaseBlocksThenExpires},
	{"ExpiredLeaseNotTakenOverMayFinish", testExpiredLeaseNotTakenOverMayFinish},
	{"StaleTokenCannotFinish", testStaleTokenCannotFinish},
	{"SentIsFinal", testSentIsFinal},
	{"RetryableNotDueThenDue", testRetryableNotDueThenDue},
	{"FingerprintMismatchQuarantines", testFingerprintMismatchQuarantines},
	{"QuarantineSaysWhichPartChanged", testQuarantineSaysWhichPartChanged},
	{"RotatedKeyringFindsOlderKey", testRotatedKeyringFindsOlderKey},
	{"InvalidRequests", testInvalidRequests},
	{"ConcurrentOperationsOnOneStore", testConcurrentOperationsOnOneStore},
	{"PinSnapshot", testPinSnapshot},
	{"SentByVersion", testSentByVersion},
	{"ClaimAgainAdoptsVersion", testClaimAgainAdoptsVersion},
	{"PinRecordsResendAsNewVersion", testPinRecordsResendAsNewVersion},
	{"Observe", testObserve},
	{"EveryTransitionLeavesAnEvent", testEveryTransitionLeavesAnEvent},
	{"HappyPathToldByTheReceipt", testHappyPathToldByTheReceipt},
	{"OperatorReleaseAndMarkSent", testOperatorReleaseAndMarkSent},
	{"ReleaseQuarantined", testReleaseQuarantined},
	{"ReleasedQuarantineIsClaimable", testReleasedQuarantineIsClaimable},
	{"AcknowledgeClosesReview", testAcknowledgeClosesReview},
	{"AcknowledgeRefusesUnsent", testAcknowledgeRefusesUnsent},
	{"AcknowledgeWeek", testAcknowledgeWeek},
	{"AcknowledgedIsPruned", testAcknowledgedIsPruned},
	{"FailedReceiptKeepsAddressKey", testFailedReceiptKeepsAddressKey},
	{"AcknowledgedUndoneByDowngrade", testAcknowledgedUndoneByDowngrade},
	{"CountsAndList", testCountsAndList},
	{"Prune", testPrune},
	{"PinSnapshotCountsReceiptsByKeyID", testPinSnapshotCountsReceiptsByKeyID},
	{"PinSnapshotFromBeforeZonesAdoptsFirstRun", testPinSnapshotFromBeforeZonesAdoptsFirstRun},
	{"PinnedReadsWithoutPinning", testPinnedReadsWithoutPinning},
	{"WeekPinsListsTheWeeksPins", testWeekPinsListsTheWeeksPins},
	{"WeekUnfinishedCountsClaimedAndRetryable", testWeekUnfinishedCountsClaimedAndRetryable},
	{"PinSnapshotPartial", testPinSnapshotPartial},
	{"Repin", testRepin},
	{"ObservedKeys", testObservedKeys},
	{"TwoProcesses", testTwoProcesses},
	{"MigrateTwiceAndConcurrently", testMigrateTwiceAndConcurrently},
	{"RenewExtendsHeldLeases", testRenewExtendsHeldLeases},
	{"TakeoverOfStartedSendSaysWhen", testTakeoverOfStartedSendSaysWhen},
	{"PruneKeepsLiveReceiptsWhateverTheirAge", testPruneKeepsLiveReceiptsWhateverTheirAge},
	{"PruneLeavesTombstones", testPruneLeavesTombstones},
	{"PruneKeepsAWeekUnderRun", testPruneKeepsAWeekUnderRun},
	{"PruneRefusesNoCutoff", testPruneRefusesNoCutoff},
	{"PruneEndsClaimsNoRunFinishes", testPruneEndsClaimsNoRunFinishes},
	{"PruneEndsNoClaimOfWeekStartedAfterListing", testPruneEndsNoClaimOfWeekStartedAfterListing},
	{"PruneProviderEventsKeepsEvidence", testPruneProviderEventsKeepsEvidence},
	{"PruneSoftBouncesKeepsStreaks", testPruneSoftBouncesKeepsStreaks},
	{"PruneRefusesNegativeEventRetention", testPruneRefusesNegativeEventRetention},
	{"OldestRows", testOldestRows},
	{"RecordRunEnd", testRecordRunEnd},
	{"RecordExpectation", testRecordExpectation},
	{"CountsFollowEveryChange", testCountsFollowEveryChange},
	{"NoCustomerData", testNoCustomerData},
	{"WeekKeysAndStates", testWeekKeysAndStates},
	{"SuppressIsIdempotentAndRecorded", testSuppressIsIdempotentAndRecorded},
	{"SuppressionFoundAfterRotation", testSuppressionFoundAfterRotation},
	{"SuppressConcurrently", testSuppressConcurrently},
	{"SuppressionRequestsValidated", testSuppressionRequestsValidated},
	{"DurabilityHolds", testDurabilityHolds},
	{"SchemaVersion", testSchemaVersion},
	{"DownToRefusesLiveClaims", testDownToRefusesLiveClaims},
	{"EndClaimsOfCrashedRuns", testEndClaimsOfCrashedRuns},
	{"SkewedClocksDecideNothing", testSkewedClocksDecideNothing},
	{"ProviderEventsRecordedOnce", testProviderEventsRecordedOnce},
	{"SoftBounceStreak", testSoftBounceStreak},
	{"EventEvidenceAndWatermark", testEventEvidenceAndWatermark},
	{"ProviderEventsConcurrently", testProviderEventsConcurrently},
	{"ProviderEventsValidated", testProviderEventsValidated},
}

// poolTests need Driver.Pool.
var poolTests = []test{
	{"RenewSkipsLockedRows", testRenewSkipsLockedRows},
	{"PruneAndRunStartDoNotCrossPostgres", testPruneAndRunStartDoNotCrossPostgres},
	{"PruneEndingWaitsForRunStartPostgres", testPruneEndingWaitsForRunStartPostgres},
}

// Run runs the contract suite on d, each test as a parallel subtest of t.
// It re-executes the test binary for the tests that need two processes,
// running only its subtest HelperProcess, so the caller's test must be a
// top-level test function.
func Run(t *testing.T, d Driver) {
	t.Helper()
	all := append([]test{{"HelperProcess", helperProcess}, {"Transitions", testTransitions}}, tests...)
	if d.Pool != nil {
		all = append(all, poolTests...)
	}
	for _, tc := range all {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, d)
		})
	}
}

// open opens a store on cfg with clk, closed when the test ends. clk is
// both the caller's clock and the ledger's (Clocks.LedgerNow), so that a
// test moves the time leases and retries are decided by; the tests of
// skewed clocks (clock.go) open stores on the database's own clock.
func open(t testing.TB, d Driver, cfg Database, clk *clock) ledger.Store {
	t.Helper()
	var c Clocks
	if clk != nil {
		c = Clocks{Now: clk.Now, LedgerNow: clk.Now}
	}
	return openWith(t, d, cfg, c)
}

// openWith opens a store on cfg with clocks, closed when the test ends.
func openWith(t testing.TB, d Driver, cfg Database, clocks Clocks) ledger.Store {
	t.Helper()
	s := d.Open(t, cfg, clocks)
	t.Cleanup(func() { s.Close() })
	return s
}

// fresh returns a migrated store on a new database, with its clock and config.
func fresh(t testing.TB, d Driver) (ledger.Store, *clock, Database) {
	t.Helper()
	cfg := d.Fresh(t)
	clk := newClock()
	s := open(t, d, cfg, clk)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return s, clk, cfg
}
