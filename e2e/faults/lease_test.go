package faults

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weeklydigest/digest/internal/e2etest"
)

// Short leases, and SMTP timeouts short enough for them (a lease must be
// at least four timeouts). Mailpit on loopback answers in milliseconds.
var shortLease = []string{"DIGEST_LEASE=3s", "DIGEST_SMTP_TIMEOUT=500ms"}

// finishing is the configuration of the run that completes a week after a
// storm: the storm's short leases and SMTP timeouts test the edges, but a
// finishing run with a 250 ms SMTP timeout fails sends on a loaded machine
// (a reply later than that is a timeout), and its backoffs can outlast its
// deadline. The storm's claims expire on their own 1-2 s leases whatever
// lease the finishing run takes.
var finishing = []string{"DIGEST_LEASE=20s", "DIGEST_SMTP_TIMEOUT=5s"}

// takeovers counts the claims a run took over from another after the
// other's lease expired.
func takeovers(t *testing.T, e *e2etest.Env) int {
	t.Helper()
	var n int
	err := e.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM receipt_events WHERE detail LIKE 'lease expired; taken over%'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// wantBothZero checks that both runs exited 0 and logs what each did.
func wantBothZero(t *testing.T, name string, a, b e2etest.Result) {
	t.Helper()
	for i, r := range []e2etest.Result{a, b} {
		if r.Code != 0 {
			t.Fatalf("run %c: exit %d, want 0\n%s", 'A'+i, r.Code, r.Stderr)
		}
	}
	t.Logf("NUMBERS %s: A sent=%d reconciled=%d lost=%d lost_after_send=%d renewals=%d; B sent=%d reconciled=%d lost=%d",
		name, a.Count(t, "sent"), a.Count(t, "reconciled"), a.Count(t, "lost_claims"), a.Count(t, "lost_after_send"), a.Count(t, "renewals"),
		b.Count(t, "sent"), b.Count(t, "reconciled"), b.Count(t, "lost_claims"))
}

// Run A is frozen (SIGSTOP) past its lease while it holds claims, some
// marked as sending; run B takes them over and sends; A is resumed. A
// sends nothing whose lease it no longer holds, and says which claims it
// lost: every customer gets exactly one message.
func TestStalledRunPastItsLeaseDoesNotSend(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(60, week40)
	env := append([]string{"DIGEST_RATE=5", "DIGEST_BURST=1"}, shortLease...)
	args := []string{"run", "--week", week40s, "--deadline", "2m", "--lookup-delay", "1s", "--retry-backoff", "1s"}

	a := startRun(t, e, env, args...)
	e2etest.WaitFor(t, time.Minute, "run A to send", func() bool { return e.MailpitCount() >= 3 || a.exited() })
	if a.exited() {
		t.Fatalf("run A ended before the freeze\n%s", a.wait().Stderr)
	}
	pid := a.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b := startRun(t, e, env, args...)
	e2etest.WaitFor(t, time.Minute, "run B to take over A's claims", func() bool { return takeovers(t, e) > 0 || b.exited() })
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	ra, rb := a.wait(), b.wait()
	wantBothZero(t, "sigstop", ra, rb)
	e.AssertExactlyOnce(want)
	if rc := e.Receipts(); rc["sent"] != len(want) || len(rc) != 1 {
		t.Fatalf("receipts = %v, want all %d sent", rc, len(want))
	}
	if ra.Count(t, "lost_claims") == 0 || !strings.Contains(ra.Stderr, "claim lost to another run") {
		t.Fatalf("run A lost no claim to B, or did not say so (takeovers %d)\n%s", takeovers(t, e), ra.Stderr)
	}
}

// An SMTP server holds the end of DATA of the first messages longer than
// the lease, and stores them late. The run's send is cut at its timeout,
// well inside the lease, and recorded as ambiguous; a second run meanwhile
// cannot take the claim over, and whoever claims it next looks it up
// after the delay and finds it: exactly one message each.
func TestSlowEndOfDataCannotOutliveTheLease(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(12, week40)
	const lease = 3 * time.Second
	px := startHoldingProxy(t, e.Mailpit.SMTPAddr(), func(n int) time.Duration {
		if n <= 3 {
			return lease + time.Second
		}
		return 0
	})
	e.Set("DIGEST_SMTP_URL", "smtp://"+px.Addr()+"?tls=none")
	env := append([]string{"DIGEST_RATE=20", "DIGEST_BURST=1"}, shortLease...)
	args := []string{"run", "--week", week40s, "--deadline", "2m", "--lookup-delay", (lease + 2*time.Second).String(), "--retry-backoff", "1s"}

	a := startRun(t, e, env, args...)
	e2etest.WaitFor(t, time.Minute, "a held end of DATA", func() bool { return px.held.Load() > 0 || a.exited() })
	b := startRun(t, e, env, args...)
	ra, rb := a.wait(), b.wait()
	wantBothZero(t, "slow-end-of-data", ra, rb)
	if px.held.Load() == 0 {
		t.Fatal("no end of DATA was held: the fault was not injected")
	}
	e.AssertExactlyOnce(want)
	if rc := e.Receipts(); rc["sent"] != len(want) || len(rc) != 1 {
		t.Fatalf("receipts = %v, want all %d sent", rc, len(want))
	}
	if got := ra.Count(t, "reconciled") + rb.Count(t, "reconciled"); got == 0 {
		t.Fatalf("no held message was found by a look-up: the held sends were not ambiguous\n%s", ra.Stderr)
	}
}

// At a slow rate with a short lease, a run's claims wait longer than the
// lease for the limiter. It claims only what it can send soon and renews
// the leases of the claims still waiting, so a concurrent run never takes
// one over: exactly one message each.
func TestSlowRateKeepsWaitingClaims(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(16, week40)
	env := append([]string{"DIGEST_RATE=2", "DIGEST_BURST=1"}, shortLease...)
	args := []string{"run", "--week", week40s, "--deadline", "2m", "--lookup-delay", "1s", "--retry-backoff", "1s"}

	a := startRun(t, e, env, args...)
	e2etest.WaitFor(t, time.Minute, "run A to send", func() bool { return e.MailpitCount() >= 1 || a.exited() })
	b := startRun(t, e, env, args...)
	ra, rb := a.wait(), b.wait()
	wantBothZero(t, "slow-rate", ra, rb)
	e.AssertExactlyOnce(want)
	if n := takeovers(t, e); n != 0 {
		t.Fatalf("%d claims were taken over from a live run", n)
	}
	if ra.Count(t, "renewals") == 0 {
		t.Fatal("run A renewed no lease")
	}
}
