package faults

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/e2etest"
)

// crashPlan is how hard the crash tests push: the default keeps the suite
// inside the CI budget, DIGEST_SOAK=1 is the long mode.
type crashPlan struct {
	customers int
	kills     int
	seed      uint64
}

func planCrashes(t *testing.T) crashPlan {
	t.Helper()
	p := crashPlan{customers: 1000, kills: 24}
	if os.Getenv("DIGEST_SOAK") != "" {
		p.customers, p.kills = 5000, 200
	}
	p.seed = uint64(time.Now().UnixNano())
	if s := os.Getenv("DIGEST_CRASH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("DIGEST_CRASH_SEED=%q: want an unsigned integer", s)
		}
		p.seed = v
	}
	t.Logf("crash seed %d (replay: DIGEST_CRASH_SEED=%d go test ./e2e/faults -run '^%s$')", p.seed, p.seed, t.Name())
	return p
}

// The storms send at 30 messages a second, so that the week (about 880
// digests) outlasts the kills (24 × 0.76 s on average): every kill lands on
// a live run, however few digests each crash leaves to look up or hold.
//
// killRuns starts "digest run" plan.kills times and SIGKILLs each at a
// seeded random moment between 20 ms and 1.5 s after its start. It returns
// how many were killed while running (the others had already finished).
func killRuns(t *testing.T, e *e2etest.Env, p crashPlan, extra []string, args ...string) (killed int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(p.seed, 0x6b696c6c))
	for i := range p.kills {
		after := time.Duration(20+rng.IntN(1480)) * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := e.Command(ctx, extra, args...)
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(exited)
		}()
		timer := time.NewTimer(after)
		select {
		case <-exited:
			t.Logf("kill %d: run ended by itself (exit %d) before %s", i+1, cmd.ProcessState.ExitCode(), after)
		case <-timer.C:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-exited
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
				killed++
			}
		}
		timer.Stop()
		cancel()
	}
	return killed
}

// The job under fire: runs killed with SIGKILL at random moments (before
// the pin, mid-claim, between send and record, in the retry pass), a 1 s
// lease, then a run to completion. Every customer with activity has
// exactly one message; every receipt is sent.
func TestSIGKILLStormSendsExactlyOnce(t *testing.T) {
	t.Parallel()
	p := planCrashes(t)
	e := e2etest.NewEnv(t)
	want := e.Seed(p.customers, week40)
	slow := []string{"DIGEST_LEASE=1s", "DIGEST_SMTP_TIMEOUT=250ms", "DIGEST_RATE=30", "DIGEST_BURST=4"}

	// Mailpit lists a message at once: a run that takes over a claim whose
	// send had started need wait only a second before looking it up.
	killed := killRuns(t, e, p, slow, "run", "--week", week40s, "--deadline", "30s", "--batch-size", "20", "--lookup-delay", "1s", "--retry-backoff", "1s")
	if killed < 20 && os.Getenv("DIGEST_CRASH_SEED") == "" {
		t.Fatalf("only %d of %d runs were killed while running; want at least 20", killed, p.kills)
	}
	before := e.MailpitCount()

	final := e.RunEnv(finishing, "run", "--week", week40s, "--deadline", "2m", "--lookup-delay", "1s", "--retry-backoff", "1s")
	if final.Code != 0 {
		t.Fatalf("final run: exit %d\n%s", final.Code, final.Stderr)
	}
	d := e.Delivered(want)
	r := e.Receipts()
	t.Logf("NUMBERS crash: seed=%d kills=%d customers=%d wanted=%d messages=%d (during kills %d) duplicates=%d lost=%d receipts=%v final: sent=%d reconciled=%d duplicates=%d retryable=%d passes=%d",
		p.seed, killed, p.customers, len(want), d.Received, before, d.Duplicates, d.Missing, r,
		final.Count(t, "sent"), final.Count(t, "reconciled"), final.Count(t, "duplicates"), final.Count(t, "retryable"), final.Count(t, "passes"))
	if d.Duplicates+d.Missing+d.Unexpected > 0 {
		t.Fatalf("exactly-once broken after %d kills (seed %d): %+v", killed, p.seed, d)
	}
	if r["sent"] != len(want) || len(r) != 1 {
		t.Fatalf("receipts by state = %v, want all %d sent", r, len(want))
	}
}

// The same storm with no look-up and --ambiguous hold: a run killed
// between a send and its record leaves a digest nobody can check, so it is
// held, never sent again. No customer gets two messages; every customer
// is sent or held, and every held one is listed by "digest review list".
func TestSIGKILLStormWithoutLookupHolds(t *testing.T) {
	t.Parallel()
	p := planCrashes(t)
	// Each crash here also uses up the claims it had marked as sending
	// (held, never sent): twice the customers keep the week going past
	// the last kill.
	p.customers *= 2
	e := e2etest.NewEnv(t)
	e.Unset("DIGEST_LOOKUP_URL")
	want := e.Seed(p.customers, week40)
	slow := []string{"DIGEST_LEASE=1s", "DIGEST_SMTP_TIMEOUT=250ms", "DIGEST_RATE=30", "DIGEST_BURST=4"}
	args := []string{"run", "--week", week40s, "--ambiguous", "hold", "--deadline", "30s", "--batch-size", "20", "--retry-backoff", "1s"}

	killed := killRuns(t, e, p, slow, args...)
	if killed < 20 && os.Getenv("DIGEST_CRASH_SEED") == "" {
		t.Fatalf("only %d of %d runs were killed while running; want at least 20", killed, p.kills)
	}
	final := e.RunEnv(finishing, "run", "--week", week40s, "--ambiguous", "hold", "--deadline", "2m", "--retry-backoff", "1s")
	if final.Code != 0 && final.Code != 4 {
		t.Fatalf("final run: exit %d, want 0 or 4 (review)\n%s", final.Code, final.Stderr)
	}

	d := e.Delivered(want)
	r := e.Receipts()
	if d.Duplicates > 0 || d.Unexpected > 0 {
		t.Fatalf("no look-up, hold: %+v", d)
	}
	if r["sent"]+r["held"] != len(want) || len(r) > 2 {
		t.Fatalf("receipts by state = %v, want %d sent or held", r, len(want))
	}
	// Every customer without a message is held, and listed for review.
	kr, err := digest.ParseKeyring(e2etest.TestKeyring)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Mailpit.Recipients(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	inMailpit := map[string]bool{}
	for _, a := range got {
		inMailpit[a] = true
	}
	list := e.MustRun("review", "list", "--state", "held", "--limit", "10000").Stdout
	heldListed := strings.Count(list, "held")
	lost := 0
	for email := range want {
		if inMailpit[email] {
			continue
		}
		id := strings.TrimSuffix(strings.TrimPrefix(email, "customer"), "@example.com")
		key := kr.Key(digest.Identity{Customer: "cust_" + id, Week: week40, Type: "weekly_activity", Version: "v1"})
		if !strings.Contains(list, string(key)) {
			lost++
			t.Errorf("%s has no message and its key %s is not held for review", email, key)
		}
	}
	t.Logf("NUMBERS crash-hold: seed=%d kills=%d wanted=%d messages=%d duplicates=%d held=%d (listed %d) lost=%d receipts=%v",
		p.seed, killed, len(want), d.Received, d.Duplicates, r["held"], heldListed, lost, r)
	if heldListed < r["held"] {
		t.Fatalf("review list shows %d held lines, the ledger holds %d:\n%s", heldListed, r["held"], list)
	}
}

// holdsAfterKill starts a run at rate msg/s without a look-up, SIGKILLs it
// once at least `after` messages arrived, and returns how many claims it
// left marked as sending: what the next run holds for review.
func holdsAfterKill(t *testing.T, rate, customers, after int) int {
	t.Helper()
	e := e2etest.NewEnv(t)
	e.Unset("DIGEST_LOOKUP_URL")
	e.Seed(customers, week40)
	b := startRun(t, e, []string{"DIGEST_RATE=" + strconv.Itoa(rate), "DIGEST_BURST=1"},
		"run", "--week", week40s, "--ambiguous", "hold", "--deadline", "0")
	e2etest.WaitFor(t, time.Minute, "the run to send", func() bool { return e.MailpitCount() >= after || b.exited() })
	if b.exited() {
		t.Fatalf("the run ended before the kill\n%s", b.wait().Stderr)
	}
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	b.wait()
	var n int
	if err := e.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM receipts WHERE state = 'claimed' AND send_started`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The window of claims marked as sending and not yet recorded follows the
// rate: a crash at 5 msg/s leaves a handful for review (2 marks of 2, the
// 4 senders, the finish in flight), not the ~54 of 25-claim chunks.
func TestCrashHoldsFollowTheRate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ rate, customers, after, most int }{
		{rate: 5, customers: 40, after: 3, most: 10},
		{rate: 50, customers: 160, after: 20},
		{rate: 500, customers: 1000, after: 150},
	} {
		t.Run(strconv.Itoa(c.rate), func(t *testing.T) {
			t.Parallel()
			holds := []int{holdsAfterKill(t, c.rate, c.customers, c.after), holdsAfterKill(t, c.rate, c.customers, c.after)}
			t.Logf("NUMBERS crash-window: rate=%d msg/s holds per crash=%v", c.rate, holds)
			for _, h := range holds {
				if c.most > 0 && h > c.most {
					t.Errorf("a crash at %d msg/s left %d claims marked as sending, want at most %d", c.rate, h, c.most)
				}
			}
		})
	}
}
