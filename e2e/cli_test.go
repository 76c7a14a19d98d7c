package e2e

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weeklydigest/digest/internal/e2etest"
)

// cleanEnv is the process environment without any DIGEST_ variable: the
// embedded default, whatever the machine running the tests has set.
func cleanEnv(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DIGEST_") {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// runClean runs the binary in a fresh directory with only the given
// DIGEST_ settings.
func runClean(t *testing.T, vars []string, args ...string) e2etest.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := e2etest.Bare(t, t.TempDir()).Command(ctx, nil, args...)
	cmd.Env = cleanEnv(vars...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	return e2etest.Result{Code: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String()}
}

// The runbook's own schedule line: everything after "--" reaches each run
// unchanged, flags that run shares with schedule included.
func TestScheduleHandsEverythingAfterDashDashToEachRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	snap := filepath.Join(e2etest.RepoRoot(), "examples", "snapshot.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := e2etest.Bare(t, dir).Command(ctx, nil, "schedule", "--cron", "@every 1s", "--tz", "Europe/Berlin", "--",
		"--deadline", "45m", "--grace", "30s", "--snapshot", snap, "--week", "2026-W48", "--content-version", "v9", "--tz", "UTC")
	cmd.Env = cleanEnv("DIGEST_METRICS_ADDR=127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	finished := false
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), `"msg":"scheduled run finished"`) {
			finished = true
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stderr)
	log.Write(rest)
	_ = cmd.Wait()
	if !finished || cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("schedule: run finished %v, exit %d\n%s", finished, cmd.ProcessState.ExitCode(), log.String())
	}
	if !strings.Contains(log.String(), `"exit_code":0`) {
		t.Fatalf("the scheduled run did not exit 0:\n%s", log.String())
	}
	// --content-version and --tz after "--" are the run's, not schedule's.
	if !regexp.MustCompile(`"msg":"run starting",("run_id":"[^"]*",)?"week":"2026-W48","type":"weekly_activity","version":"v9"`).MatchString(log.String()) {
		t.Fatalf("the run did not get --week 2026-W48 --content-version v9:\n%s", log.String())
	}
	files, _ := filepath.Glob(filepath.Join(dir, "outbox", "*.eml"))
	if len(files) == 0 {
		t.Fatalf("the scheduled run sent nothing:\n%s", log.String())
	}

	// Arguments before "--" are schedule's: a stray one is refused.
	if r := runClean(t, nil, "schedule", "--cron", "0 6 * * MON", "--deadline", "45m"); r.Code != 2 || !strings.Contains(r.Stderr, "--deadline") {
		t.Errorf("schedule --deadline (before --): exit %d, %q; want 2 naming the flag", r.Code, r.Stderr)
	}
}

// A mistyped flag is one line on stderr naming it and the closest flag,
// exit 2, and nothing on stdout.
func TestMistypedFlagIsOneLineWithTheClosestMatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args       []string
		bad, close string
	}{
		{[]string{"run", "--weak", "2026-W48"}, "--weak", "--week"},
		{[]string{"run", "--snapshto", "x.jsonl"}, "--snapshto", "--snapshot"},
		{[]string{"status", "--weeek", "2026-W48"}, "--weeek", "--week"},
		{[]string{"prune", "--older-then", "90d"}, "--older-then", "--older-than"},
		{[]string{"schedule", "--corn", "0 6 * * MON"}, "--corn", "--cron"},
	} {
		r := runClean(t, nil, tc.args...)
		lines := strings.Split(strings.TrimRight(r.Stderr, "\n"), "\n")
		if r.Code != 2 || r.Stdout != "" || len(lines) != 1 || !strings.Contains(lines[0], tc.bad) || !strings.Contains(lines[0], "did you mean "+tc.close+"?") {
			t.Errorf("digest %s: exit %d, stdout %d bytes, stderr %q; want exit 2, no stdout, one line naming %s and %s",
				strings.Join(tc.args, " "), r.Code, len(r.Stdout), r.Stderr, tc.bad, tc.close)
		}
	}
	// Nothing near: no suggestion.
	if r := runClean(t, nil, "week", "--zzzzzzzz"); r.Code != 2 || strings.Contains(r.Stderr, "did you mean") {
		t.Errorf("digest week --zzzzzzzz: exit %d, %q", r.Code, r.Stderr)
	}
}

func TestReviewRefusesUnknownSubcommandsAndStates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"review", "lst"}, `unknown subcommand "lst"`},
		{[]string{"review", "lst", "k1:abc"}, `unknown subcommand "lst"`},
		{[]string{"review", "list", "--state", "bogus"}, `--state "bogus"`},
	} {
		if r := runClean(t, nil, tc.args...); r.Code != 2 || !r.Says(tc.want) {
			t.Errorf("digest %s: exit %d, %q; want exit 2 saying %s", strings.Join(tc.args, " "), r.Code, r.Stderr, tc.want)
		}
	}
	if r := runClean(t, nil, "review", "list", "--state", "held"); r.Code != 0 {
		t.Errorf("digest review list --state held: exit %d, %s", r.Code, r.Stderr)
	}
}

// A database URL that can never work is a configuration error (exit 2,
// which a Job does not retry), and its password is never printed.
func TestUnsupportedDatabaseURLIsAConfigurationError(t *testing.T) {
	t.Parallel()
	for _, url := range []string{"mysql://digest:hunter2secret@db/app", "postgres://digest:hunter2secret@db:notaport/app", "hunter2secret"} {
		for _, args := range [][]string{{"migrate"}, {"status"}, {"review", "list"}, {"prune", "--older-than", "90d", "--dry-run"}} {
			r := runClean(t, []string{"DIGEST_DATABASE_URL=" + url}, args...)
			if r.Code != 2 || !strings.Contains(r.Stderr, "DIGEST_DATABASE_URL") {
				t.Errorf("DIGEST_DATABASE_URL=%s digest %s: exit %d, %q; want exit 2", url, strings.Join(args, " "), r.Code, r.Stderr)
			}
			if strings.Contains(r.Stderr, "hunter2secret") {
				t.Errorf("digest %s printed the database password: %q", strings.Join(args, " "), r.Stderr)
			}
		}
	}
}

// helpFlags returns the flags "digest CMD --help" lists, with the type
// word after each ("" for a boolean).
func helpFlags(t *testing.T, cmd string) map[string]string {
	t.Helper()
	r := runClean(t, nil, cmd, "--help")
	if r.Code != 0 {
		t.Fatalf("digest %s --help: exit %d %s", cmd, r.Code, r.Stderr)
	}
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)(?: (\w+))?$`).FindAllStringSubmatch(r.Stdout, -1) {
		out[m[1]] = m[2]
	}
	return out
}

func TestHelpShowsTypesAndOnlyTheFlagsACommandUses(t *testing.T) {
	t.Parallel()
	run := helpFlags(t, "run")
	for flag, typ := range map[string]string{"rate": "float", "burst": "int", "concurrency": "int", "lease": "duration", "deadline": "duration", "batch-size": "int", "week": "string", "lenient": ""} {
		if got, ok := run[flag]; !ok || got != typ {
			t.Errorf("digest run --help: -%s %q (listed %v); want %q", flag, got, ok, typ)
		}
	}
	for cmd, want := range map[string][]string{
		"week": {"tz"},
		"seed": {"customers", "database-url", "out", "seed", "week"},
	} {
		var got []string
		for f := range helpFlags(t, cmd) {
			got = append(got, f)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("digest %s --help lists %v; want %v", cmd, got, want)
		}
	}
}

// --retry-backoff takes a duration above 0 and at most the 1h cap; any
// other value is a usage error before anything is opened.
func TestRunRefusesABadRetryBackoff(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"0s", "-1s", "2h"} {
		if r := runClean(t, nil, "run", "--snapshot", "x.jsonl", "--week", "2026-W40", "--retry-backoff", bad); r.Code != 2 || !r.Says("--retry-backoff "+bad) {
			t.Errorf("run --retry-backoff %s: exit %d, %q; want exit 2 naming the flag", bad, r.Code, r.Stderr)
		}
	}
}
