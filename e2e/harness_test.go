package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/mailpittest"
	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/snapshot"
)

// binary is the digest command built once for the package.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "digest-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "digest")
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	build := exec.Command("go", "build", "-o", binary, "./cmd/digest")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build digest: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// repoRoot returns the repository root (for examples/).
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd)
}

// env is one test's world: a fresh PostgreSQL schema holding the ledger and
// the source tables, a Mailpit, and the digest environment pointing at them.
type env struct {
	t       *testing.T
	url     string
	pool    *pgxpool.Pool
	mailpit *mailpittest.Server
	vars    []string
	dir     string
}

const testKeyring = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, url: pgtest.Schema(t), mailpit: mailpittest.Start(t), dir: t.TempDir()}
	pool, err := pgxpool.New(context.Background(), e.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.pool = pool
	e.vars = []string{
		"DIGEST_DATABASE_URL=" + e.url,
		"DIGEST_HMAC_KEYS=" + testKeyring,
		"DIGEST_SMTP_URL=smtp://" + e.mailpit.SMTPAddr() + "?tls=none",
		"DIGEST_LOOKUP_URL=mailpit+" + e.mailpit.APIURL(),
		"DIGEST_FROM=Digest <digest@bank.example>",
		"DIGEST_RATE=2000",
		"DIGEST_BURST=50",
		"DIGEST_LOG_LEVEL=info",
	}
	e.mustRun("migrate")
	return e
}

// seed fills the source tables with n synthetic customers for week and
// returns the emails of those who have activity (who must get a digest).
func (e *env) seed(n int, week digest.ISOWeek) map[string]bool {
	e.t.Helper()
	out := e.mustRun("seed", "--customers", fmt.Sprint(n), "--week", week.String())
	if !strings.Contains(out.stdout, fmt.Sprintf("seeded %d customers", n)) {
		e.t.Fatalf("seed said: %s", out.stdout)
	}
	want := map[string]bool{}
	for r := range snapshot.Synthetic(n, week, 1) {
		d, err := digest.Build(r, digest.Spec{Week: week, Location: time.UTC, Type: "weekly_activity", Version: "v1"})
		if err != nil {
			e.t.Fatal(err)
		}
		if !d.Empty() {
			want[r.Customer.Email] = true
		}
	}
	return want
}

type result struct {
	code   int
	stdout string
	stderr string
}

// summary returns the summary of the run's final log line.
func (r result) summary(t *testing.T) map[string]any {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(r.stderr))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		if s, ok := line["summary"].(map[string]any); ok {
			return s
		}
	}
	t.Fatalf("no summary line in the run's log:\n%s", r.stderr)
	return nil
}

func (r result) count(t *testing.T, name string) int {
	t.Helper()
	v, _ := r.summary(t)[name].(float64)
	return int(v)
}

func (e *env) command(ctx context.Context, extra []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = e.dir
	cmd.Env = append(append(os.Environ(), e.vars...), extra...)
	return cmd
}

func (e *env) run(args ...string) result {
	e.t.Helper()
	return e.runEnv(nil, args...)
}

func (e *env) runEnv(extra []string, args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := e.command(ctx, extra, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			e.t.Fatalf("digest %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func (e *env) mustRun(args ...string) result {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("digest %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// assertExactlyOnce checks that Mailpit holds exactly one message for each
// wanted address and none for anybody else.
func (e *env) assertExactlyOnce(want map[string]bool) {
	e.t.Helper()
	got, err := e.mailpit.Recipients(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	seen := map[string]int{}
	for _, a := range got {
		seen[a]++
	}
	dups, missing, extra := 0, 0, 0
	for a, n := range seen {
		if n > 1 {
			dups += n - 1
			e.t.Errorf("%s got %d messages", a, n)
		}
		if !want[a] {
			extra++
		}
	}
	for a := range want {
		if seen[a] == 0 {
			missing++
		}
	}
	if dups+missing+extra > 0 {
		e.t.Fatalf("exactly-once broken: %d duplicates, %d customers without their digest, %d unexpected (of %d wanted, %d received)",
			dups, missing, extra, len(want), len(got))
	}
}

// receipts counts ledger receipts by state.
func (e *env) receipts() map[string]int {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT state, count(*) FROM receipts GROUP BY state`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			e.t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

// waitFor polls cond every 20ms until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}
