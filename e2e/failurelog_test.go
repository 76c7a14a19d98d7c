package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/internal/e2etest"
)

// A command that exits non-zero says why in its JSON log: one record, ERROR
// for 1 and 2, WARN for 3 and 4, with exit_code and reason, and nothing on
// stderr that is not a JSON line (a log pipeline parses every line). The
// run's summary counts as retryable the rows left to retry, not the
// temporary failures met.
func TestFailuresAreOneJSONRecordWithExitCodeAndReason(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	snap := filepath.Join(e2etest.RepoRoot(), "examples", "snapshot.jsonl")
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"customer_id\":\"c1\", broken json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := e2etest.Bare(t, dir)
	e.Vars = []string{"DIGEST_DATABASE_URL=", "DIGEST_HMAC_KEYS=", "DIGEST_HMAC_KEYS_FILE=", "DIGEST_SMTP_URL=", "DIGEST_LOG_LEVEL=info"}
	for _, tc := range []struct {
		name   string
		env    []string
		args   []string
		code   int
		level  string
		reason string
	}{
		{"usage", nil, []string{"run", "--week", "2026-W99", "--snapshot", snap}, 2, "ERROR", "--week"},
		{"refused snapshot", nil, []string{"run", "--week", "2026-W48", "--snapshot", bad}, 1, "ERROR", "snapshot refused"},
		{"mail server unreachable", []string{"DIGEST_SMTP_URL=smtp://127.0.0.1:1?tls=none"},
			[]string{"run", "--week", "2026-W48", "--snapshot", snap, "--deadline", "0"}, 3, "WARN", "unreachable"},
		{"status of a week not run", nil, []string{"status", "--week", "2026-W10", "--snapshot", snap}, 3, "WARN", "not run yet"},
	} {
		r := e.RunEnv(tc.env, tc.args...)
		if r.Code != tc.code {
			t.Errorf("%s: exit %d, want %d\n%s", tc.name, r.Code, tc.code, r.Stderr)
			continue
		}
		for _, line := range strings.Split(strings.TrimRight(r.Stderr, "\n"), "\n") {
			if line != "" && !json.Valid([]byte(line)) {
				t.Errorf("%s: a stderr line is not JSON: %q", tc.name, line)
			}
		}
		fs := r.Failures()
		if len(fs) != 1 {
			t.Errorf("%s: %d failure records, want 1\n%s", tc.name, len(fs), r.Stderr)
			continue
		}
		f := fs[0]
		if f.Level != tc.level || f.ExitCode != tc.code || f.Command != tc.args[0] || !strings.Contains(f.Reason, tc.reason) {
			t.Errorf("%s: failure record %+v; want level %s, exit_code %d, command %s, a reason saying %q", tc.name, f, tc.level, tc.code, tc.args[0], tc.reason)
		}
		if tc.code == 3 && tc.args[0] == "run" {
			if n := r.Count(t, "retryable"); n != 0 {
				t.Errorf("%s: summary retryable %d; nothing was claimed, so no row is left retryable", tc.name, n)
			}
		}
	}
}
