package faults

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/weeklydigest/digest/internal/e2etest"
)

// What retry passes cost, counted by the binary's summary against real
// PostgreSQL: each retry pass reads only the customers left pending (the
// summary's source_rows), claims only their keys, and passes are spaced by
// when those come due, coalesced, not by a tenth of the lease.

// retryCostScale is the week and the settings of the measurement: 200
// customers and a 3s lease, or with DIGEST_SOAK set the defaults (45s
// lease; a 1m look-up delay, under the 3m a command may take here) and 1000 customers (883 digests).
func retryCostScale() (customers int, lease []string, lookupDelay string) {
	if os.Getenv("DIGEST_SOAK") != "" {
		return 1000, nil, "1m"
	}
	return 200, []string{"DIGEST_LEASE=3s", "DIGEST_SMTP_TIMEOUT=500ms"}, "1s"
}

// A first attempt that failed (every RCPT answered 421) leaves the week
// retryable with a jittered backoff (--retry-backoff 2s: due 1 to 2 s
// later); the next run waits for it in a few passes that read only what is
// due, well inside a 20 s deadline that the default backoff (15 to 30 s)
// would outlast.
func TestRetryCostAfterAFailedFirstAttempt(t *testing.T) {
	t.Parallel()
	customers, _, _ := retryCostScale()
	e := e2etest.NewEnv(t)
	want := e.Seed(customers, week40)
	addr, _ := replySMTP(t, 421, smtp.EnhancedCode{4, 3, 0}, "try again later")
	first := e.RunEnv([]string{"DIGEST_SMTP_URL=smtp://" + addr + "?tls=none"}, "run", "--week", week40s, "--deadline", "0", "--retry-backoff", "2s")
	if first.Code != 3 || first.Count(t, "retryable") != len(want) {
		t.Fatalf("first attempt: exit %d, %d retryable; want 3 and %d\n%s", first.Code, first.Count(t, "retryable"), len(want), first.Stderr)
	}

	r := e.Run("run", "--week", week40s, "--deadline", "20s")
	passes, calls, rows := r.Count(t, "passes"), r.Count(t, "ledger_calls"), r.Count(t, "source_rows")
	t.Logf("NUMBERS retry-after-failed-attempt: digests=%d passes=%d ledger_calls=%d source_rows=%d duration=%v", len(want), passes, calls, rows, r.Summary(t)["duration"])
	if r.Code != 0 {
		t.Fatalf("rerun: exit %d\n%s", r.Code, r.Stderr)
	}
	e.AssertExactlyOnce(want)
	// The backoff spreads the due times over a second; a pass takes those
	// due within a tenth of the lease of the first.
	if passes > 6 {
		t.Errorf("%d passes; want at most 6", passes)
	}
	if retryRows := rows - customers; retryRows > len(want)+passes {
		t.Errorf("retry passes read %d source rows; want at most the %d pending (plus one a pass)", retryRows, len(want))
	}
	// How many ledger calls the passes make depends on how items group
	// into batches, which timing decides (a loaded machine measured 51
	// where a quiet one makes 33): the NUMBERS line above is the
	// measurement. What load cannot move is that the calls are batched:
	// fewer round trips than digests.
	if calls >= len(want) {
		t.Errorf("%d ledger calls for %d digests: the retry passes do not batch", calls, len(want))
	}
}

// A run killed mid-week leaves claims under its lease; the rerun waits
// them out with one quick recheck and one wake-up at the lease's expiry
// (plus the look-up delay for the sends that had started), each reading
// only the customers held.
func TestRetryCostWaitingOutACrashedLease(t *testing.T) {
	t.Parallel()
	customers, lease, delay := retryCostScale()
	e := e2etest.NewEnv(t)
	want := e.Seed(customers, week40)
	b := startRun(t, e, append(lease, "DIGEST_RATE=20", "DIGEST_BURST=1"), "run", "--week", week40s, "--lookup-delay", delay)
	e2etest.WaitFor(t, time.Minute, "the first messages", func() bool { return e.MailpitCount() >= 10 || b.exited() })
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	b.wait()
	rc := e.Receipts()
	unsettled := 0
	for state, n := range rc {
		if state != "sent" {
			unsettled += n
		}
	}
	if unsettled == 0 {
		t.Fatalf("receipts after the kill: %v; want some claims left", rc)
	}

	r := e.RunEnv(lease, "run", "--week", week40s, "--deadline", "10m", "--lookup-delay", delay)
	passes, calls, rows := r.Count(t, "passes"), r.Count(t, "ledger_calls"), r.Count(t, "source_rows")
	t.Logf("NUMBERS retry-after-crash: digests=%d left_by_crash=%d passes=%d ledger_calls=%d source_rows=%d duration=%v",
		len(want), unsettled, passes, calls, rows, r.Summary(t)["duration"])
	if r.Code != 0 {
		t.Fatalf("rerun: exit %d\n%s", r.Code, r.Stderr)
	}
	e.AssertExactlyOnce(want)
	// A quiet machine makes 4 (first, quick recheck, expiry, look-up
	// delay); a loaded one may wake once or twice more for keys whose
	// answer came back late. What load cannot make is a spin: a pass for
	// every recheck of a key that is never due.
	if passes > 8 {
		t.Errorf("%d passes waiting out the lease; want a handful (4 on a quiet machine: first, quick recheck, expiry, look-up delay)", passes)
	}
	if retryRows := rows - customers; retryRows > (passes-1)*unsettled {
		t.Errorf("retry passes read %d source rows; want at most %d a pass (the claims the crash left)", retryRows, unsettled)
	}
	// As above, the exact count of calls is timing's; batched is not.
	if calls >= len(want) {
		t.Errorf("%d ledger calls for %d digests: the retry passes do not batch", calls, len(want))
	}
}
