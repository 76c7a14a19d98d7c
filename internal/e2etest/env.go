package e2etest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/mailpittest"
	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/snapshot"
)

// Env is one test's world: a fresh PostgreSQL schema holding the ledger and
// the source tables, a Mailpit, and the digest environment pointing at them.
type Env struct {
	T       *testing.T
	URL     string // the schema's connection string (search_path set)
	Pool    *pgxpool.Pool
	Mailpit *mailpittest.Server
	Vars    []string // DIGEST_* settings of every command, KEY=VALUE
	Dir     string   // working directory of the commands

	scan *logScan // set when ScanLogs: the commands' stderr, scanned at the end
}

// TestKeyring is the HMAC keyring of every Env. Its secret is the bytes
// 0x00…0x1f.
const TestKeyring = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

// NewEnv creates the world and migrates the ledger.
func NewEnv(t *testing.T) *Env {
	t.Helper()
	return NewEnvOn(t, pgtest.BaseURL())
}

// NewEnvOn is NewEnv with the ledger and source tables on the PostgreSQL
// server at base (a connection string) instead of the test server.
func NewEnvOn(t *testing.T, base string) *Env {
	t.Helper()
	e := &Env{T: t, URL: pgtest.SchemaOn(t, base), Mailpit: mailpittest.Start(t), Dir: t.TempDir()}
	pool, err := pgxpool.New(context.Background(), e.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.Pool = pool
	e.Vars = []string{
		"DIGEST_DATABASE_URL=" + e.URL,
		"DIGEST_HMAC_KEYS=" + TestKeyring,
		"DIGEST_SMTP_URL=smtp://" + e.Mailpit.SMTPAddr() + "?tls=none",
		"DIGEST_LOOKUP_URL=mailpit+" + e.Mailpit.APIURL(),
		"DIGEST_FROM=Digest <digest@bank.example>",
		"DIGEST_RATE=2000",
		"DIGEST_BURST=50",
		"DIGEST_LOG_LEVEL=info",
	}
	if ScanLogs {
		e.scan = &logScan{used: map[string]bool{}}
		t.Cleanup(e.scanLogs)
	}
	e.MustRun("migrate")
	return e
}

// Bare returns an Env with no servers and no DIGEST_* settings, running in
// dir (the embedded default).
func Bare(t *testing.T, dir string) *Env { return &Env{T: t, Dir: dir} }

// Set replaces (or adds) one setting of every later command.
func (e *Env) Set(key, value string) {
	for i, kv := range e.Vars {
		if strings.HasPrefix(kv, key+"=") {
			e.Vars[i] = key + "=" + value
			return
		}
	}
	e.Vars = append(e.Vars, key+"="+value)
}

// Unset removes one setting from every later command.
func (e *Env) Unset(key string) {
	out := e.Vars[:0]
	for _, kv := range e.Vars {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	e.Vars = out
}

// Seed fills the source tables with n synthetic customers for week and
// returns the emails of those who have activity (who must get a digest).
func (e *Env) Seed(n int, week digest.ISOWeek) map[string]bool {
	e.T.Helper()
	out := e.MustRun("seed", "--customers", fmt.Sprint(n), "--week", week.String())
	if !strings.Contains(out.Stdout, fmt.Sprintf("seeded %d customers", n)) {
		e.T.Fatalf("seed said: %s", out.Stdout)
	}
	for r := range snapshot.Synthetic(n, week, 1) {
		e.UsesAddresses(r.Customer.Email)
	}
	return Wanted(e.T, n, week)
}

// Wanted returns the emails of the synthetic customers (of n, for week)
// who have activity and so must get a digest.
func Wanted(t testing.TB, n int, week digest.ISOWeek) map[string]bool {
	t.Helper()
	want := map[string]bool{}
	for r := range snapshot.Synthetic(n, week, 1) {
		d, err := digest.Build(r, digest.Spec{Week: week, Location: time.UTC, Type: "weekly_activity", Version: "v1"})
		if err != nil {
			t.Fatal(err)
		}
		if !d.Empty() {
			want[r.Customer.Email] = true
		}
	}
	return want
}

// Result is what a finished command left.
type Result struct {
	Code   int
	Stdout string
	Stderr string
}

// Summary returns the summary of the run's final log line.
func (r Result) Summary(t testing.TB) map[string]any {
	t.Helper()
	if s := r.summary(); s != nil {
		return s
	}
	t.Fatalf("no summary line in the run's log:\n%s", r.Stderr)
	return nil
}

func (r Result) summary() map[string]any {
	sc := bufio.NewScanner(strings.NewReader(r.Stderr))
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
	return nil
}

// Failure is the record a command that exits non-zero logs (JSON, when
// stderr is not a terminal): its exit code and why.
type Failure struct {
	Level    string `json:"level"`
	Msg      string `json:"msg"`
	Command  string `json:"command"`
	ExitCode int    `json:"exit_code"`
	Reason   string `json:"reason"`
}

// Failures returns the failure records of stderr's JSON lines, in order.
func (r Result) Failures() []Failure {
	var out []Failure
	sc := bufio.NewScanner(strings.NewReader(r.Stderr))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var f Failure
		if json.Unmarshal(sc.Bytes(), &f) == nil && f.Reason != "" && f.Command != "" {
			out = append(out, f)
		}
	}
	return out
}

// Says reports whether the command's output says s: stdout or stderr as
// written, or the reason of a failure record, read as the line a
// terminal shows ("digest COMMAND: REASON"), unescaped.
func (r Result) Says(s string) bool {
	if strings.Contains(r.Stdout+r.Stderr, s) {
		return true
	}
	for _, f := range r.Failures() {
		if strings.Contains("digest "+f.Command+": "+f.Reason, s) {
			return true
		}
	}
	return false
}

// Count returns one counter of the run's summary.
func (r Result) Count(t testing.TB, name string) int {
	t.Helper()
	v, _ := r.Summary(t)[name].(float64)
	return int(v)
}

// Command returns the digest command with the Env's settings and extra
// ones (KEY=VALUE, later ones win).
func (e *Env) Command(ctx context.Context, extra []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, Binary(), args...)
	cmd.Dir = e.Dir
	cmd.Env = append(append(os.Environ(), e.Vars...), extra...)
	if e.scan != nil {
		cmd.Stderr = e.scan.sink() // a caller that sets its own passes it to Logged
	}
	return cmd
}

// Run runs a command to its end (at most three minutes).
func (e *Env) Run(args ...string) Result {
	e.T.Helper()
	return e.RunEnv(nil, args...)
}

// RunEnv runs a command with extra settings.
func (e *Env) RunEnv(extra []string, args ...string) Result {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := e.Command(ctx, extra, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	e.Logged(stderr.String())
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			e.T.Fatalf("digest %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return Result{Code: code, Stdout: stdout.String(), Stderr: stderr.String()}
}

// MustRun runs a command and fails the test unless it exits 0.
func (e *Env) MustRun(args ...string) Result {
	e.T.Helper()
	r := e.Run(args...)
	if r.Code != 0 {
		e.T.Fatalf("digest %s: exit %d\n%s%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r
}

// Delivery is how Mailpit's messages fall against the wanted addresses.
type Delivery struct {
	Received   int // messages in Mailpit
	Duplicates int // messages beyond the first to one address
	Missing    int // wanted addresses without a message
	Unexpected int // addresses that were not wanted
}

// Delivered counts Mailpit's messages against want.
func (e *Env) Delivered(want map[string]bool) Delivery {
	e.T.Helper()
	got, err := e.Mailpit.Recipients(context.Background())
	if err != nil {
		e.T.Fatal(err)
	}
	seen := map[string]int{}
	for _, a := range got {
		seen[a]++
	}
	d := Delivery{Received: len(got)}
	for a, n := range seen {
		if n > 1 {
			d.Duplicates += n - 1
			e.T.Errorf("%s got %d messages", a, n)
		}
		if !want[a] {
			d.Unexpected++
		}
	}
	for a := range want {
		if seen[a] == 0 {
			d.Missing++
		}
	}
	return d
}

// AssertExactlyOnce checks that Mailpit holds exactly one message for each
// wanted address and none for anybody else.
func (e *Env) AssertExactlyOnce(want map[string]bool) {
	e.T.Helper()
	d := e.Delivered(want)
	if d.Duplicates+d.Missing+d.Unexpected > 0 {
		e.T.Fatalf("exactly-once broken: %d duplicates, %d customers without their digest, %d unexpected (of %d wanted, %d received)",
			d.Duplicates, d.Missing, d.Unexpected, len(want), d.Received)
	}
}

// Receipts counts ledger receipts by state.
func (e *Env) Receipts() map[string]int {
	e.T.Helper()
	rows, err := e.Pool.Query(context.Background(), `SELECT state, count(*) FROM receipts GROUP BY state`)
	if err != nil {
		e.T.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			e.T.Fatal(err)
		}
		out[s] = n
	}
	if err := rows.Err(); err != nil {
		e.T.Fatal(err)
	}
	return out
}

// MailpitCount returns the number of messages in Mailpit.
func (e *Env) MailpitCount() int {
	e.T.Helper()
	n, err := e.Mailpit.Count(context.Background())
	if err != nil {
		e.T.Fatal(err)
	}
	return n
}

// WaitFor polls cond every 20ms until it holds or the timeout passes.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
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
