package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weeklydigest/digest/internal/e2etest"
)

// withURL rewrites the env's database URL: host and application_name.
func withURL(t *testing.T, e *e2etest.Env, host, app string) string {
	t.Helper()
	u, err := url.Parse(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		u.Host = host
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String()
}

// bgRun is a "digest run" in the background.
type bgRun struct {
	cmd  *exec.Cmd
	done chan struct{}
	res  e2etest.Result
}

// startRun starts "digest run" in the background.
func startRun(t *testing.T, e *e2etest.Env, extra []string, args ...string) *bgRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cmd := e.Command(ctx, extra, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	b := &bgRun{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		defer cancel()
		_ = cmd.Wait()
		e.Logged(stderr.String())
		b.res = e2etest.Result{Code: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String()}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			b.res.Code = -1
			b.res.Stderr += "\nkilled by " + ws.Signal().String()
		}
	}()
	return b
}

func (b *bgRun) exited() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

func (b *bgRun) wait() e2etest.Result {
	<-b.done
	return b.res
}

// faultRuns runs the week while inject strikes at each message count in
// at (or as soon as a run is under way again, when a fault ended the
// previous one), and checks that every faulted run recovered or stopped
// cleanly. It returns the exit codes of the runs.
func faultRuns(t *testing.T, e *e2etest.Env, at []int, inject func()) []int {
	t.Helper()
	extra := []string{"DIGEST_LEASE=2s", "DIGEST_SMTP_TIMEOUT=500ms", "DIGEST_RATE=150", "DIGEST_BURST=2"}
	args := []string{"run", "--week", week40s, "--deadline", "20s", "--batch-size", "20", "--lookup-delay", "1s", "--retry-backoff", "1s"}
	var codes []int
	b := startRun(t, e, extra, args...)
	for _, n := range at {
		e2etest.WaitFor(t, time.Minute, fmt.Sprintf("%d messages or the run's end", n), func() bool {
			return e.MailpitCount() >= n || b.exited()
		})
		if b.exited() {
			r := b.wait()
			checkFaultedRun(t, r)
			codes = append(codes, r.Code)
			b = startRun(t, e, extra, args...)
			e2etest.WaitFor(t, time.Minute, "the next run to send", func() bool {
				return e.MailpitCount() > n || b.exited()
			})
		}
		inject()
	}
	r := b.wait()
	checkFaultedRun(t, r)
	return append(codes, r.Code)
}

// checkFaultedRun accepts a run that recovered (0) or one that stopped with
// a clear error (1 with a "digest run:" line naming the database failure,
// or 3 when it left rows pending); never a crash.
func checkFaultedRun(t *testing.T, r e2etest.Result) {
	t.Helper()
	switch {
	case strings.Contains(r.Stderr, "goroutine ") || strings.Contains(r.Stderr, "panic:"):
		t.Fatalf("the run crashed:\n%s", r.Stderr)
	case r.Code == 0 || r.Code == 3:
	case r.Code == 1 && r.Says("digest run: "):
		t.Logf("faulted run stopped: %+v", r.Failures())
	default:
		t.Fatalf("faulted run: exit %d, want 0, 1 with a clear error, or 3\n%s", r.Code, r.Stderr)
	}
}

// The run's PostgreSQL backends are terminated (pg_terminate_backend) three
// times while it sends. The run recovers or stops with a clear error and
// exit code; the next run completes; nobody gets two messages.
func TestPostgresBackendsTerminatedMidRun(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(400, week40)
	app := fmt.Sprintf("digest_faults_%x", rand.Uint64())
	e.Set("DIGEST_DATABASE_URL", withURL(t, e, "", app))

	terminated := 0
	codes := faultRuns(t, e, []int{40, 120, 200}, func() {
		var n int
		if err := e.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1) t`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		terminated += n
	})

	next := e.RunEnv(finishing, "run", "--week", week40s, "--deadline", "2m", "--lookup-delay", "1s", "--retry-backoff", "1s")
	if next.Code != 0 {
		t.Fatalf("next run: exit %d\n%s", next.Code, next.Stderr)
	}
	e.AssertExactlyOnce(want)
	t.Logf("NUMBERS pg-terminate: backends terminated=%d faulted exits=%v next: sent=%d reconciled=%d duplicates=%d",
		terminated, codes, next.Count(t, "sent"), next.Count(t, "reconciled"), next.Count(t, "duplicates"))
	if terminated == 0 {
		t.Fatal("no backend was terminated: the fault was not injected")
	}
}

// PostgreSQL "restarts" mid-run, seen through a TCP proxy: every
// connection is cut and new ones are refused for two seconds, twice. The
// shared server is not touched. The run recovers or stops with a clear
// error; the next run completes; nobody gets two messages.
func TestPostgresRestartMidRun(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(400, week40)
	u, err := url.Parse(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	px := startProxy(t, u.Host, nil)
	e.Set("DIGEST_DATABASE_URL", withURL(t, e, px.Addr(), "digest_faults_restart"))

	restarts := 0
	codes := faultRuns(t, e, []int{50, 150}, func() {
		px.SetDown(true)
		px.Cut()
		restarts++
		time.Sleep(2 * time.Second) // the outage itself, not a wait for a goroutine
		px.SetDown(false)
	})

	next := e.RunEnv(finishing, "run", "--week", week40s, "--deadline", "2m", "--lookup-delay", "1s", "--retry-backoff", "1s")
	if next.Code != 0 {
		t.Fatalf("next run: exit %d\n%s", next.Code, next.Stderr)
	}
	e.AssertExactlyOnce(want)
	t.Logf("NUMBERS pg-restart: restarts=%d connections cut=%d refused=%d faulted exits=%v next: sent=%d reconciled=%d",
		restarts, px.cuts.Load(), px.refused.Load(), codes, next.Count(t, "sent"), next.Count(t, "reconciled"))
}
