package faults

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/internal/e2etest"
)

// pgCluster is a private PostgreSQL cluster of one test: its own data
// directory, port and socket directory, run as the postgres OS user (initdb
// and postgres refuse root). The shared test server is never touched: this
// one is crashed with SIGKILL and restarted.
type pgCluster struct {
	t      *testing.T
	bin    string // the directory of initdb and postgres
	dir    string // socket directory and server log
	data   string
	port   int
	cred   *syscall.Credential
	cmd    *exec.Cmd
	exited chan struct{}
	frozen int // the WAL writer stopped by freezeWALWriter, or 0
}

// startCluster runs initdb with extra postgresql.conf lines and starts the
// server. It needs root (to run as the postgres user) and a PostgreSQL
// installation under /usr/lib/postgresql: without either it fails, naming
// what is missing.
func startCluster(t *testing.T, conf ...string) *pgCluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("this test starts a private PostgreSQL cluster as the postgres OS user: run it as root (uid %d now)", os.Geteuid())
	}
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Fatal("no initdb under /usr/lib/postgresql/*/bin: install the PostgreSQL server package (apt-get install postgresql)")
	}
	sort.Strings(bins)
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("the postgres OS user runs the private cluster: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// Not t.TempDir: its parent is root's alone, the postgres user could
	// not reach it. A short path also keeps the socket's under 107 bytes.
	dir, err := os.MkdirTemp("", "digest-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	c := &pgCluster{t: t, bin: filepath.Dir(bins[len(bins)-1]), dir: dir, data: filepath.Join(dir, "data"),
		port: freePort(t), cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}

	initdb := exec.Command(filepath.Join(c.bin, "initdb"), "-D", c.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	lines := append([]string{
		"listen_addresses = '127.0.0.1'",
		fmt.Sprintf("port = %d", c.port),
		fmt.Sprintf("unix_socket_directories = '%s'", dir),
		"max_connections = 60",
		"shared_buffers = 32MB",
	}, conf...)
	f, err := os.OpenFile(filepath.Join(c.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("\n# digest crash test\n" + strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	c.start()
	t.Cleanup(c.stop)
	return c
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// URL is the cluster's connection string (database postgres, trust auth).
func (c *pgCluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// start starts the postmaster as a child of the test (so the test reaps
// it) and waits until it accepts connections: after a crash, until its
// recovery is done.
func (c *pgCluster) start() {
	c.t.Helper()
	log, err := os.OpenFile(filepath.Join(c.dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), "-D", c.data)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.cmd, c.exited = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(c.exited)
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, c.URL())
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return
		}
		select {
		case <-c.exited:
			c.t.Fatalf("the private PostgreSQL server exited at start: %v\n%s", err, c.logTail())
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the private PostgreSQL server did not accept connections within a minute: %v\n%s", err, c.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// crash SIGKILLs the postmaster and every process it forked (backends,
// WAL writer, checkpointer) at once, as a machine or container dies: what
// was only in the server's memory is gone. It waits until they are all
// dead and returns how many processes it killed.
func (c *pgCluster) crash() int {
	c.t.Helper()
	pid := c.cmd.Process.Pid
	children := childPIDs(pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for _, p := range children {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	<-c.exited
	c.frozen = 0
	e2etest.WaitFor(c.t, 30*time.Second, "the killed server's processes to die", func() bool {
		for _, p := range children {
			if alive(p) {
				return false
			}
		}
		return true
	})
	return 1 + len(children)
}

// freezeWALWriter stops (SIGSTOP) the server's WAL writer until the next
// crash. A kill -9 leaves the WAL the server wrote to the OS in the page
// cache, where a power cut would not: with its writer frozen, WAL that no
// commit flushed stays in the server's memory and dies with it, as it
// would in a machine's crash. A session with synchronous_commit on flushes
// its own commit and needs no writer.
func (c *pgCluster) freezeWALWriter() {
	c.t.Helper()
	e2etest.WaitFor(c.t, 30*time.Second, "the server's WAL writer", func() bool {
		for _, p := range childPIDs(c.cmd.Process.Pid) {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); strings.Contains(string(b), "walwriter") {
				c.frozen = p
				return true
			}
		}
		return false
	})
	if err := syscall.Kill(c.frozen, syscall.SIGSTOP); err != nil {
		c.t.Fatal(err)
	}
}

// stop shuts the server down (fast shutdown) at the end of the test.
func (c *pgCluster) stop() {
	select {
	case <-c.exited:
		return
	default:
	}
	if c.frozen != 0 {
		_ = syscall.Kill(c.frozen, syscall.SIGCONT)
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

func (c *pgCluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// childPIDs lists the processes whose parent is pid (from /proc).
func childPIDs(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _ := procStat(p); ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// alive reports whether process p exists and is not a zombie (a dead
// child nobody reaped yet holds no memory and no socket).
func alive(p int) bool {
	_, state := procStat(p)
	return state != "" && state != "Z" && state != "X"
}

// procStat returns the parent pid and state of process p, or 0 and "" if
// it is gone.
func procStat(p int) (ppid int, state string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
	if err != nil {
		return 0, ""
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, ""
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[0]
}

// The ledger's PostgreSQL server, tuned with synchronous_commit = off, dies
// with SIGKILL several times while the week is being sent, and is restarted
// each time; its WAL writer is frozen between crashes, so an acknowledged
// commit nobody flushed is lost as in a machine's crash.
// The job sets synchronous_commit = on on its own sessions, so every send
// mark and every receipt it was told is committed survives the crash: the
// last run finishes the week with no customer sent twice and none missing.
func TestPostgresServerKilledMidRunSendsExactlyOnce(t *testing.T) {
	t.Parallel()
	pg := startCluster(t, "synchronous_commit = off", "fsync = on", "full_page_writes = on",
		"wal_buffers = 16MB", "bgwriter_lru_maxpages = 0", "checkpoint_timeout = 1h")
	e := e2etest.NewEnvOn(t, pg.URL())
	var sc string
	if err := e.Pool.QueryRow(context.Background(), `SELECT current_setting('synchronous_commit')`).Scan(&sc); err != nil || sc != "off" {
		t.Fatalf("the private server's synchronous_commit is %q (%v), want off: the test would prove nothing", sc, err)
	}
	want := e.Seed(400, week40)
	pg.freezeWALWriter()

	extra := []string{"DIGEST_LEASE=2s", "DIGEST_SMTP_TIMEOUT=500ms", "DIGEST_RATE=60", "DIGEST_BURST=2"}
	args := []string{"run", "--week", week40s, "--deadline", "20s", "--batch-size", "20", "--lookup-delay", "1s", "--retry-backoff", "1s"}
	var results []e2etest.Result
	kills, killedLive, processes := 0, 0, 0
	b := startRun(t, e, extra, args...)
	for _, n := range []int{30, 90, 150, 210} {
		e2etest.WaitFor(t, time.Minute, fmt.Sprintf("%d messages or the run's end", n), func() bool {
			return e.MailpitCount() >= n || b.exited()
		})
		if b.exited() {
			results = append(results, b.wait())
			b = startRun(t, e, extra, args...)
			e2etest.WaitFor(t, time.Minute, "the next run to send", func() bool {
				return e.MailpitCount() > n || b.exited()
			})
		}
		if !b.exited() {
			killedLive++
		}
		processes += pg.crash()
		kills++
		pg.start()
		pg.freezeWALWriter()
	}
	results = append(results, b.wait())
	e.Pool.Reset() // its connections died with the server
	if killedLive < 3 {
		t.Fatalf("only %d of %d crashes hit a run while it was running; want at least 3", killedLive, kills)
	}
	for _, r := range results {
		checkFaultedRun(t, r)
	}

	final := e.RunEnv(finishing, "run", "--week", week40s, "--deadline", "2m", "--lookup-delay", "1s", "--retry-backoff", "1s")
	if final.Code != 0 {
		t.Fatalf("final run: exit %d\n%s", final.Code, final.Stderr)
	}
	results = append(results, final)
	lookups, held := 0, 0
	var codes []int
	for _, r := range results {
		codes = append(codes, r.Code)
		if !strings.Contains(r.Stderr, `"summary":`) {
			continue // a run stopped by the crash before its summary
		}
		lookups += r.Count(t, "lookups_found") + r.Count(t, "lookups_not_found") + r.Count(t, "lookup_errors")
		held += r.Count(t, "held")
	}
	d := e.Delivered(want)
	rc := e.Receipts()
	t.Logf("NUMBERS pg-crash (synchronous_commit=off on the server): kills=%d (mid-run %d, processes killed %d) wanted=%d messages=%d duplicates=%d lost=%d look-ups=%d held=%d receipts=%v exits=%v final: sent=%d reconciled=%d",
		kills, killedLive, processes, len(want), d.Received, d.Duplicates, d.Missing, lookups, held, rc, codes,
		final.Count(t, "sent"), final.Count(t, "reconciled"))
	e.AssertExactlyOnce(want)
	if rc["sent"] != len(want) || len(rc) != 1 {
		t.Fatalf("receipts by state = %v, want all %d sent", rc, len(want))
	}
}
