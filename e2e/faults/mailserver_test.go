package faults

import (
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/internal/e2etest"
)

// A server that goes down during the run: the run stops in the pass where
// the sends in a row that failed to connect reach the circuit threshold,
// exit 3, with the connect failures counted, not logged one by one; once
// the server is back, the next run finishes the week exactly once.
func TestSMTPServerDownMidRunStopsEarly(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(200, week40)
	px := startProxy(t, e.Mailpit.SMTPAddr(), nil)
	e.Set("DIGEST_SMTP_URL", "smtp://"+px.Addr()+"?tls=none")
	slow := []string{"DIGEST_RATE=20", "DIGEST_BURST=1", "DIGEST_SMTP_TIMEOUT=1s", "DIGEST_LEASE=5s"}

	b := startRun(t, e, slow, "run", "--week", week40s, "--deadline", "10m", "--lookup-delay", "1s", "--retry-backoff", "1s")
	e2etest.WaitFor(t, time.Minute, "the first messages", func() bool { return e.MailpitCount() >= 5 || b.exited() })
	px.SetDown(true)
	px.Cut()
	r := b.wait()
	t.Logf("NUMBERS server-down-mid-run: exit %d, %v", r.Code, r.Summary(t))
	if r.Code != 3 || !strings.Contains(r.Stderr, "stopping early") || r.Count(t, "passes") > deadPassesToStop {
		t.Fatalf("exit %d after %d passes; want 3 within %d passes\n%s", r.Code, r.Count(t, "passes"), deadPassesToStop, r.Stderr)
	}
	if n := strings.Count(r.Stderr, "later failures of this kind are only counted"); n > 4 {
		t.Fatalf("%d first-of-a-kind lines: the failures are logged one by one\n%s", n, r.Stderr)
	}

	// Back up: the next run sends the rest at once; the few whose
	// connect failed wait out their backoff (--deadline 0: not here).
	px.SetDown(false)
	again := e.RunEnv([]string{"DIGEST_LEASE=5s", "DIGEST_SMTP_TIMEOUT=1s"}, "run", "--week", week40s, "--deadline", "0")
	t.Logf("NUMBERS rerun: exit %d, %v", again.Code, again.Summary(t))
	backingOff := again.Count(t, "pending")
	if again.Code != 0 && again.Code != 3 || backingOff > r.Count(t, "retryable") {
		t.Fatalf("rerun: exit %d, %d pending; want at most the %d that failed to connect\n%s", again.Code, backingOff, r.Count(t, "retryable"), again.Stderr)
	}
	// A send cut mid-DATA may have been stored: pending (maybe sent, for
	// a look-up), yet in Mailpit.
	if d := e.Delivered(want); d.Duplicates+d.Unexpected > 0 || d.Missing > backingOff {
		t.Fatalf("delivery %+v: want no duplicate, at most %d missing (backing off)", d, backingOff)
	}
}

// deadPassesToStop mirrors run's rule for weeks smaller than the circuit
// threshold: at most this many passes against a server that is down.
const deadPassesToStop = 2
