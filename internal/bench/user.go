package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/digest"
)

// UserConfig says what MeasureUser measures: the digest binary as the user
// runs it, against a null SMTP server in a process of its own.
type UserConfig struct {
	// DatabaseURL is the PostgreSQL server and database; the measurement
	// works in a schema of its own there. Required.
	DatabaseURL string
	// Schema to use; empty: a fresh bench_<random> one, dropped at the
	// end. A named schema is kept and its seeded customers reused when
	// their number matches; its ledger is emptied before each run.
	Schema string
	// DigestBin is the digest binary to run. Required.
	DigestBin string
	// Self is the digest-bench executable: it runs the null SMTP server
	// ("null-smtp") and the plain loop ("plain-loop") as processes of
	// their own. Required.
	Self string
	// Customers to seed. Default 20,000.
	Customers int
	// Concurrency: SMTP connections of the job (DIGEST_CONCURRENCY) and
	// of the plain loop. Default 4.
	Concurrency int
	// Runs: rounds of job, limit and plain-loop runs, interleaved, on
	// each sink. Default 3.
	Runs int
	// Sinks to measure against, each a null SMTP server process of its
	// own, in turn within each round. Default: SinkChunking and
	// SinkNoChunking.
	Sinks []Sink
	// Week of the seeded activity. Default DefaultWeek.
	Week digest.ISOWeek
	// Progress, when set, receives one line per phase.
	Progress io.Writer
	// TraceDir, when set, receives a Go execution trace of each job run
	// (digest run --trace TraceDir/run-N.trace).
	TraceDir string
}

// Sink is a kind of null SMTP server: what it offers decides how few
// round trips a message can take.
type Sink string

const (
	// SinkChunking offers PIPELINING and CHUNKING (go-smtp's own EHLO): a
	// message can go in one round trip (MAIL, RCPT, BDAT LAST).
	SinkChunking Sink = "chunking"
	// SinkNoChunking offers PIPELINING without CHUNKING: a message takes
	// two round trips (MAIL, RCPT, DATA; then the content).
	SinkNoChunking Sink = "no-chunking"
)

// Sample is one job run, one limit run or one plain-loop run.
type Sample struct {
	Kind      string  `json:"kind"` // "job", "limit" or "plain"
	Sink      Sink    `json:"sink"`
	Messages  int     `json:"messages"`
	Received  int64   `json:"received"` // counted by the null server during the run
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	// CPU per message in microseconds: the sending process (the job or
	// the plain loop), the null SMTP server process and the run's
	// PostgreSQL backends (job only).
	ProcessCPU  float64 `json:"process_cpu_us"`
	ServerCPU   float64 `json:"server_cpu_us"`
	PostgresCPU float64 `json:"postgres_cpu_us"`
	Backends    int     `json:"postgres_backends,omitempty"`
	// Job only: ledger tables' size and WAL written, bytes per digest.
	LedgerBytes float64 `json:"ledger_bytes_per_digest,omitempty"`
	WALBytes    float64 `json:"wal_bytes_per_digest,omitempty"`
	// Load is /proc/loadavg's 1-minute average at the end of the run.
	Load float64 `json:"load1"`
	// Cores is the CPU time of the three processes (the sender, the SMTP
	// server, PostgreSQL's backends) over the wall time: how many cores
	// the run kept busy.
	Cores float64 `json:"cpu_cores"`
	// PeakRSS is the sending process's peak resident set (getrusage's
	// ru_maxrss), in MiB.
	PeakRSS float64 `json:"peak_rss_mib"`
	// Job only: the run's own wall time (its summary's duration, from the
	// first claim's preparations to the last record) and where each
	// pipeline stage spent it (its summary's stages).
	RunSeconds float64               `json:"run_seconds,omitempty"`
	Stages     map[string]StageTimes `json:"stages,omitempty"`
}

// StageTimes is one pipeline stage of a job run, in seconds: working,
// waiting for input, blocked on output (the send stage sums its
// connections' goroutines).
type StageTimes struct {
	Busy    float64 `json:"busy_s"`
	WaitIn  float64 `json:"wait_in_s"`
	WaitOut float64 `json:"wait_out_s"`
}

// stagesOf reads the stage times of a run's summary line.
func stagesOf(sum map[string]any) map[string]StageTimes {
	raw, ok := sum["stages"].(map[string]any)
	if !ok {
		return nil
	}
	out := make(map[string]StageTimes, len(raw))
	for name, v := range raw {
		m, _ := v.(map[string]any)
		f := func(k string) float64 { x, _ := m[k].(float64); return x }
		out[name] = StageTimes{Busy: f("busy_s"), WaitIn: f("wait_in_s"), WaitOut: f("wait_out_s")}
	}
	return out
}

// UserResult is what MeasureUser measured: every run and, for each sink,
// the medians.
type UserResult struct {
	Customers    int          `json:"customers"`
	Concurrency  int          `json:"concurrency"`
	Runs         int          `json:"runs"`
	MessageBytes int          `json:"message_bytes"` // the rendered digest the three senders send
	Samples      []Sample     `json:"samples"`
	Sinks        []SinkResult `json:"sinks"`
}

// SinkResult is the medians of the runs against one sink and the job's
// ratios to the two references.
type SinkResult struct {
	Sink  Sink   `json:"sink"`
	Job   Sample `json:"job_median"`
	Limit Sample `json:"limit_median"`
	Plain Sample `json:"plain_median"`
	// Ratio is the median job digests/s ÷ the median plain msg/s.
	Ratio float64 `json:"ratio"`
	// LimitRatio is the median job digests/s ÷ the median limit msg/s:
	// the share of what the sink can take at all that the job reaches.
	LimitRatio float64 `json:"limit_ratio"`
}

func (c *UserConfig) setDefaults() error {
	if c.Customers == 0 {
		c.Customers = 20_000
	}
	if c.Concurrency == 0 {
		c.Concurrency = 4
	}
	if c.Runs == 0 {
		c.Runs = 3
	}
	if len(c.Sinks) == 0 {
		c.Sinks = []Sink{SinkChunking, SinkNoChunking}
	}
	for _, k := range c.Sinks {
		if k != SinkChunking && k != SinkNoChunking {
			return fmt.Errorf("bench: sink %q: want %s or %s", k, SinkChunking, SinkNoChunking)
		}
	}
	if c.Week == (digest.ISOWeek{}) {
		c.Week = DefaultWeek
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	switch {
	case c.DatabaseURL == "":
		return errors.New("bench: DatabaseURL is required")
	case c.DigestBin == "" || c.Self == "":
		return errors.New("bench: DigestBin and Self are required")
	case c.Customers < 1:
		return fmt.Errorf("bench: customers %d: want at least 1", c.Customers)
	case c.Concurrency < 1 || c.Concurrency > 256:
		return fmt.Errorf("bench: concurrency %d: want 1 to 256", c.Concurrency)
	case c.Runs < 1 || c.Runs > 100:
		return fmt.Errorf("bench: runs %d: want 1 to 100", c.Runs)
	case c.Schema != "" && !validSchema(c.Schema):
		return fmt.Errorf("bench: schema %q: want lower-case letters, digits and '_'", c.Schema)
	}
	return nil
}

// DefaultWeek is the week MeasureUser seeds and runs by default.
var DefaultWeek = digest.ISOWeek{Year: 2026, Week: 48}

// ledgerTables are emptied before each run, so each starts from nothing.
const ledgerTables = `receipts, receipt_events, snapshot_pins, observations, prune_tombstones, week_runs, run_ends, week_expectations, week_state_counts`

// MeasureUser seeds the week with "digest seed", starts a null SMTP
// server process per sink, then, round after round and sink after sink,
// runs "digest run" (the ledger emptied before each), the limit loop and
// the plain go-mail loop; the two loops send the median-sized of the
// first digests the first sink received (see ServeNullSMTP), as many
// messages as the job sent, over as many connections.
func MeasureUser(ctx context.Context, cfg UserConfig) (UserResult, error) {
	if err := cfg.setDefaults(); err != nil {
		return UserResult{}, err
	}
	res := UserResult{Customers: cfg.Customers, Concurrency: cfg.Concurrency, Runs: cfg.Runs}
	progress := func(format string, args ...any) { fmt.Fprintf(cfg.Progress, "bench: "+format+"\n", args...) }

	ws, err := openSchema(ctx, cfg.DatabaseURL, cfg.Schema)
	if err != nil {
		return res, err
	}
	defer ws.close(ctx)
	admin, schema, dbURL := ws.admin, ws.name, ws.url
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	env := append(os.Environ(),
		"DIGEST_HMAC_KEYS=bench:"+base64.StdEncoding.EncodeToString(key),
		"DIGEST_RATE=1000000", "DIGEST_BURST=1000", // far above reach: the limiter costs, never waits
		"DIGEST_CONCURRENCY="+strconv.Itoa(cfg.Concurrency),
		"DIGEST_LOG_LEVEL=info",
	)
	digestCmd := func(extra []string, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, cfg.DigestBin, args...)
		cmd.Env = append(slices.Clone(env), extra...)
		return cmd
	}
	withDB := []string{"DIGEST_DATABASE_URL=" + dbURL}
	if out, err := digestCmd(withDB, "migrate").CombinedOutput(); err != nil {
		return res, fmt.Errorf("bench: digest migrate: %v\n%s", err, out)
	}
	var have int64
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+schema+".digest_customers").Scan(&have); err != nil {
		have = -1
	}
	if have != int64(cfg.Customers) {
		if have > 0 {
			if _, err := admin.Exec(ctx, "DROP TABLE "+schema+".digest_customers, "+schema+".digest_activity"); err != nil {
				return res, fmt.Errorf("bench: drop old source tables: %w", err)
			}
		}
		progress("digest seed --customers %d --week %s", cfg.Customers, cfg.Week)
		out, err := digestCmd(withDB, "seed", "--customers", strconv.Itoa(cfg.Customers), "--week", cfg.Week.String()).CombinedOutput()
		if err != nil {
			return res, fmt.Errorf("bench: digest seed: %v\n%s", err, out)
		}
	} else {
		progress("reusing %d seeded customers", have)
	}

	dir, err := os.MkdirTemp("", "digest-bench-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	eml := filepath.Join(dir, "first.eml")
	sinks := make([]*nullProcess, len(cfg.Sinks))
	for k, sink := range cfg.Sinks {
		keep := ""
		if k == 0 {
			keep = eml
		}
		if sinks[k], err = startNullProcess(cfg.Self, keep, sink); err != nil {
			return res, err
		}
		defer sinks[k].stop()
	}

	run := 0 // job runs so far, for their traces' names
	for i := range cfg.Runs {
		for k, sink := range cfg.Sinks {
			srv := sinks[k]
			if _, err := admin.Exec(ctx, "SET search_path TO "+schema+"; TRUNCATE "+ledgerTables); err != nil {
				return res, fmt.Errorf("bench: empty the ledger: %w", err)
			}
			progress("round %d/%d, sink %s: digest run (%d connections)", i+1, cfg.Runs, sink, cfg.Concurrency)
			job, err := jobRun(ctx, admin, srv, digestCmd, dbURL, cfg, run)
			if err != nil {
				return res, err
			}
			run++
			job.Sink = sink
			res.Samples = append(res.Samples, job)
			if res.MessageBytes == 0 {
				b, err := os.ReadFile(eml)
				if err != nil {
					return res, fmt.Errorf("bench: the null server kept no message: %w", err)
				}
				res.MessageBytes = len(b)
			}
			for _, kind := range []string{"limit", "plain"} {
				progress("round %d/%d, sink %s: %s loop, %d messages", i+1, cfg.Runs, sink, kind, job.Messages)
				s, err := loopRun(ctx, srv, cfg, kind, eml, job.Messages)
				if err != nil {
					return res, err
				}
				s.Sink = sink
				res.Samples = append(res.Samples, s)
			}
		}
	}
	for _, sink := range cfg.Sinks {
		r := SinkResult{Sink: sink, Job: medianOf(res.Samples, sink, "job"),
			Limit: medianOf(res.Samples, sink, "limit"), Plain: medianOf(res.Samples, sink, "plain")}
		if r.Plain.PerSecond > 0 {
			r.Ratio = r.Job.PerSecond / r.Plain.PerSecond
		}
		if r.Limit.PerSecond > 0 {
			r.LimitRatio = r.Job.PerSecond / r.Limit.PerSecond
		}
		res.Sinks = append(res.Sinks, r)
	}
	return res, nil
}

// jobRun runs "digest run" once and measures it.
func jobRun(ctx context.Context, admin *pgx.Conn, srv *nullProcess, digestCmd func([]string, ...string) *exec.Cmd,
	dbURL string, cfg UserConfig, i int) (Sample, error) {
	s := Sample{Kind: "job"}
	app := fmt.Sprintf("digest-bench-run-%s-%d", randomHex(3), i)
	url, err := withParam(dbURL, "application_name", app)
	if err != nil {
		return s, err
	}
	var wal0 string
	if err := admin.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&wal0); err != nil {
		return s, fmt.Errorf("bench: wal position: %w", err)
	}
	count0, srvCPU0, err := srv.count()
	if err != nil {
		return s, err
	}
	args := []string{"run", "--week", cfg.Week.String()}
	if cfg.TraceDir != "" {
		args = append(args, "--trace", filepath.Join(cfg.TraceDir, fmt.Sprintf("run-%d.trace", i+1)))
	}
	cmd := digestCmd([]string{"DIGEST_DATABASE_URL=" + url, "DIGEST_SMTP_URL=smtp://" + srv.addr + "?tls=none"}, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return s, err
	}
	backends, err := watchBackends(ctx, cfg.DatabaseURL, app)
	if err != nil {
		return s, err
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		backends.stop()
		return s, fmt.Errorf("bench: start digest run: %w", err)
	}
	sum, tail := scanSummary(stderr)
	err = cmd.Wait()
	d := time.Since(t0)
	pgCPU, n := backends.stop()
	if err != nil {
		return s, fmt.Errorf("bench: digest run: %v\n%s", err, tail)
	}
	sent, _ := sum["sent"].(float64)
	if sent < 1 {
		return s, fmt.Errorf("bench: digest run sent nothing\n%s", tail)
	}
	count1, srvCPU1, err := srv.count()
	if err != nil {
		return s, err
	}
	var wal, ledger int64
	err = admin.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint,
(SELECT sum(pg_total_relation_size(relid))::bigint FROM pg_partition_tree('receipts')) + pg_total_relation_size('receipt_events')`, wal0).Scan(&wal, &ledger)
	if err != nil {
		return s, fmt.Errorf("bench: wal and ledger size: %w", err)
	}
	s.fill(int(sent), count1-count0, d, cmd.ProcessState, srvCPU1-srvCPU0, pgCPU)
	s.Backends = n
	s.Stages = stagesOf(sum)
	if v, ok := sum["duration"].(string); ok { // a Go duration ("1.5s")
		if d, err := time.ParseDuration(v); err == nil {
			s.RunSeconds = d.Seconds()
		}
	}
	s.LedgerBytes, s.WALBytes = float64(ledger)/sent, float64(wal)/sent
	return s, nil
}

// loopRun runs the limit loop ("limit") or the plain loop ("plain")
// process once and measures it.
func loopRun(ctx context.Context, srv *nullProcess, cfg UserConfig, kind, eml string, messages int) (Sample, error) {
	s := Sample{Kind: kind}
	count0, srvCPU0, err := srv.count()
	if err != nil {
		return s, err
	}
	cmd := exec.CommandContext(ctx, cfg.Self, kind+"-loop", "--addr", srv.addr, "--eml", eml,
		"--messages", strconv.Itoa(messages), "--concurrency", strconv.Itoa(cfg.Concurrency))
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(t0)
	if err != nil {
		return s, fmt.Errorf("bench: %s loop: %v\n%s", kind, err, out)
	}
	count1, srvCPU1, err := srv.count()
	if err != nil {
		return s, err
	}
	s.fill(messages, count1-count0, d, cmd.ProcessState, srvCPU1-srvCPU0, 0)
	return s, nil
}

func (s *Sample) fill(messages int, received int64, d time.Duration, ps *os.ProcessState, srvCPU, pgCPU time.Duration) {
	us := func(c time.Duration) float64 { return float64(c.Microseconds()) / float64(messages) }
	s.Messages, s.Received, s.Seconds = messages, received, d.Seconds()
	s.PerSecond = float64(messages) / d.Seconds()
	s.ProcessCPU = us(ps.UserTime() + ps.SystemTime())
	s.ServerCPU, s.PostgresCPU = us(srvCPU), us(pgCPU)
	s.Cores = (s.ProcessCPU + s.ServerCPU + s.PostgresCPU) * float64(messages) / 1e6 / d.Seconds()
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		s.PeakRSS = float64(ru.Maxrss) / 1024 // KiB on Linux
	}
	s.Load = load1()
}

// scanSummary reads the run's JSON log to its end and returns the
// summary of its final line, and the last lines for an error message.
func scanSummary(r io.Reader) (map[string]any, string) {
	var sum map[string]any
	var tail []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil {
			if s, ok := line["summary"].(map[string]any); ok {
				sum = s
			}
		}
		tail = append(tail, sc.Text())
		if len(tail) > 20 {
			tail = tail[1:]
		}
	}
	_, _ = io.Copy(io.Discard, r)
	return sum, strings.Join(tail, "\n")
}

// medianOf returns, field by field, the median of the samples of kind
// against sink.
func medianOf(samples []Sample, sink Sink, kind string) Sample {
	var of []Sample
	for _, s := range samples {
		if s.Kind == kind && s.Sink == sink {
			of = append(of, s)
		}
	}
	med := func(f func(Sample) float64) float64 {
		v := make([]float64, len(of))
		for i, s := range of {
			v[i] = f(s)
		}
		slices.Sort(v)
		if len(v) == 0 {
			return 0
		}
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return Sample{
		Kind:        kind,
		Sink:        sink,
		Messages:    int(med(func(s Sample) float64 { return float64(s.Messages) })),
		Received:    int64(med(func(s Sample) float64 { return float64(s.Received) })),
		Seconds:     med(func(s Sample) float64 { return s.Seconds }),
		PerSecond:   med(func(s Sample) float64 { return s.PerSecond }),
		ProcessCPU:  med(func(s Sample) float64 { return s.ProcessCPU }),
		ServerCPU:   med(func(s Sample) float64 { return s.ServerCPU }),
		PostgresCPU: med(func(s Sample) float64 { return s.PostgresCPU }),
		Backends:    int(med(func(s Sample) float64 { return float64(s.Backends) })),
		LedgerBytes: med(func(s Sample) float64 { return s.LedgerBytes }),
		WALBytes:    med(func(s Sample) float64 { return s.WALBytes }),
		Load:        med(func(s Sample) float64 { return s.Load }),
		Cores:       med(func(s Sample) float64 { return s.Cores }),
		PeakRSS:     med(func(s Sample) float64 { return s.PeakRSS }),
	}
}

// load1 returns the 1-minute load average (0 where /proc is missing).
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// backendWatch follows the PostgreSQL backends of one run, found by their
// application_name, and keeps the CPU time last read of each: a backend
// exits with its client, so it is read while it lives (every 20 ms; what
// a backend spends in its last moments after the final read is lost).
type backendWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	cpu    map[uint32]time.Duration
}

func watchBackends(ctx context.Context, databaseURL, app string) (*backendWatch, error) {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return nil, fmt.Errorf("bench: connect: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &backendWatch{cancel: cancel, done: make(chan struct{}), cpu: map[uint32]time.Duration{}}
	go func() {
		defer close(w.done)
		defer conn.Close(context.WithoutCancel(ctx))
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			if n%5 == 0 { // look for new backends every 100 ms
				rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
				if err == nil {
					pids, _ := pgx.CollectRows(rows, pgx.RowTo[uint32])
					w.mu.Lock()
					for _, p := range pids {
						if _, ok := w.cpu[p]; !ok {
							w.cpu[p] = 0
						}
					}
					w.mu.Unlock()
				}
			}
			w.mu.Lock()
			for p := range w.cpu {
				if c := procCPU(p, "postgres"); c > w.cpu[p] {
					w.cpu[p] = c
				}
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w, nil
}

// stop ends the watch and returns the backends' CPU time and how many
// there were.
func (w *backendWatch) stop() (time.Duration, int) {
	w.cancel()
	<-w.done
	var sum time.Duration
	for _, c := range w.cpu {
		sum += c
	}
	return sum, len(w.cpu)
}

func withParam(connString, key, value string) (string, error) {
	if !strings.HasPrefix(connString, "postgres://") && !strings.HasPrefix(connString, "postgresql://") {
		return connString + " " + key + "=" + value, nil
	}
	return setQuery(connString, key, value)
}
