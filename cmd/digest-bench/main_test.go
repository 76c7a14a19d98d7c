package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/internal/pgtest"
)

func benchMain(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
	return code, out.String(), errOut.String()
}

// With no URL the benchmark refuses instead of picking a database by
// itself: it creates and drops schemas wherever it is pointed.
func TestNoDatabaseIsAUsageError(t *testing.T) {
	t.Parallel()
	code, out, errOut := benchMain(t, nil, "--customers", "10")
	if code != 2 || !strings.Contains(errOut, "--database-url or DIGEST_DATABASE_URL") || out != "" {
		t.Errorf("no URL: exit %d, stdout %q, stderr %q; want exit 2 naming --database-url and DIGEST_DATABASE_URL", code, out, errOut)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DIGEST_DATABASE_URL": "postgres://nowhere.invalid/x"}
	for _, args := range [][]string{{"--nope"}, {"extra"}, {"--customers", "many"}, {"--log-level", "loud"}} {
		if code, _, errOut := benchMain(t, env, args...); code != 2 || !strings.HasPrefix(errOut, "digest-bench: ") {
			t.Errorf("digest-bench %v: exit %d, %q; want exit 2 with one line", args, code, errOut)
		}
	}
}

func TestHelpListsFlags(t *testing.T) {
	t.Parallel()
	code, out, _ := benchMain(t, nil, "--help")
	if code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for _, f := range []string{"batch-size", "concurrency", "cpuprofile", "customers", "database-url", "log-level", "plain-messages", "schema"} {
		if !strings.Contains(out, "\n  -"+f+" ") && !strings.Contains(out, "\n  -"+f+"\n") {
			t.Errorf("--help lacks -%s:\n%s", f, out)
		}
	}
}

// A tiny run through the command: flags reach the benchmark and the
// report reaches stdout (internal/bench tests the measurements).
func TestSmallRun(t *testing.T) {
	t.Parallel()
	code, out, errOut := benchMain(t, map[string]string{"DIGEST_DATABASE_URL": pgtest.BaseURL(), "DIGEST_LOG_LEVEL": "error"},
		"--customers", "60", "--plain-messages", "20", "--concurrency", "2", "--batch-size", "25")
	if code != 0 || !strings.Contains(out, "\ndigests/s ") {
		t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}
