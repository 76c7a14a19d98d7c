package bench

import (
	"bufio"
	"context"
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
	// Mailer is how the job sends: MailerSMTP (the default) is the only
	// one so far.
	Mailer string
	// RTT, when positive, puts the sinks at that network distance: each
	// is reached through a DelayProxy in this process that delays every
	// byte by RTT/2 in each direction, the job and both loops alike.
	RTT time.Duration
}

// MailerSMTP is the job's SMTP mailer (DIGEST_SMTP_URL): the only mailer
// MeasureUser measures so far.
const MailerSMTP = "smtp"

// Mailers are the mailers MeasureUser accepts.
var Mailers = []string{MailerSMTP}

// RoundTrips is the fewest round trips one message takes on sink after
// the connection is set up: one with CHUNKING (MAIL, RCPT and BDAT LAST
// pipelined, one reply each), two without (MAIL, RCPT and DATA pipelined,
// then the content after 354).
func (k Sink) RoundTrips() int {
	if k == SinkNoChunking {
		return 2
	}
	return 1
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
	// With an RTT: the bytes the delay proxy delivered towards the sink
	// during the run, and the connections it accepted (the sender's).
	ProxiedBytes int64 `json:"proxied_bytes,omitempty"`
	ProxiedConns int64 `json:"proxied_connections,omitempty"`
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
	Customers   int    `json:"customers"`
	Concurrency int    `json:"concurrency"` // C: the SMTP connections
	Mailer      string `json:"mailer"`
	// RTTMillis is the round trip the delay proxy put between the senders
	// and the sinks, in milliseconds; 0: none (loopback).
	RTTMillis    float64      `json:"rtt_ms"`
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
	// With an RTT: RoundTrips is the fewest round trips a message takes
	// on this sink (Sink.RoundTrips), Bound the most messages/s C
	// connections can send at that distance, C / (RoundTrips × RTT)
	// (with CHUNKING, C/RTT: one SMTP transaction per round trip), and
	// BoundRatio the median job digests/s ÷ Bound.
	RoundTrips int     `json:"round_trips_per_message"`
	Bound      float64 `json:"bound_per_second,omitempty"`
	BoundRatio float64 `json:"bound_ratio,omitempty"`
	// RunBoundRatio is the same over the run's own time (its summary's
	// duration, Sample.RunSeconds): the median job's digests ÷ its run
	// seconds ÷ Bound, without the process's start-up and its preflight
	// check of the server (a connection, EHLO and QUIT: about three
	// round trips), which BoundRatio counts.
	RunBoundRatio float64 `json:"run_bound_ratio,omitempty"`
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
	if c.Mailer == "" {
		c.Mailer = MailerSMTP
	}
	if !slices.Contains(Mailers, c.Mailer) {
		return fmt.Errorf("bench: mailer %q: want %s", c.Mailer, strings.Join(Mailers, ", "))
	}
	if c.RTT < 0 {
		return fmt.Errorf("bench: RTT %s: want 0 (none) or positive", c.RTT)
	}
	if c.Runs < 1 || c.Runs > 100 {
		return fmt.Errorf("bench: runs %d: want 1 to 100", c.Runs)
	}
	return checkBinaryWeek(&c.Week, &c.Progress, c.DatabaseURL, c.DigestBin, c.Self, c.Schema, c.Customers, c.Concurrency)
}

// checkBinaryWeek fills in the week and progress defaults and checks the
// settings MeasureUser and MeasureCapacity share.
func checkBinaryWeek(week *digest.ISOWeek, progress *io.Writer, databaseURL, digestBin, self, schema string, customers, concurrency int) error {
	if *week == (digest.ISOWeek{}) {
		*week = DefaultWeek
	}
	if *progress == nil {
		*progress = io.Discard
	}
	switch {
	case databaseURL == "":
		return errors.New("bench: DatabaseURL is required")
	case digestBin == "" || self == "":
		return errors.New("bench: DigestBin and Self are required")
	case customers < 1:
		return fmt.Errorf("bench: customers %d: want at least 1", customers)
	case concurrency < 1 || concurrency > 256:
		return fmt.Errorf("bench: concurrency %d: want 1 to 256", concurrency)
	case schema != "" && !validSchema(schema):
		return fmt.Errorf("bench: schema %q: want lower-case letters, digits and '_'", schema)
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
	res := UserResult{Customers: cfg.Customers, Concurrency: cfg.Concurrency, Runs: cfg.Runs,
		Mailer: cfg.Mailer, RTTMillis: float64(cfg.RTT) / float64(time.Millisecond)}
	progress := func(format string, args ...any) { fmt.Fprintf(cfg.Progress, "bench: "+format+"\n", args...) }

	w, err := openBinaryWeek(ctx, cfg.DatabaseURL, cfg.Schema, cfg.DigestBin, cfg.Customers, cfg.Concurrency, cfg.Week, progress)
	if err != nil {
		return res, err
	}
	defer w.close(ctx)
	digestCmd := func(extra []string, args ...string) *exec.Cmd { return w.command(ctx, extra, args...) }

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
		if cfg.RTT > 0 {
			if sinks[k].proxy, err = StartDelayProxy(sinks[k].addr, cfg.RTT/2); err != nil {
				return res, err
			}
		}
	}

	run := 0 // job runs so far, for their traces' names
	for i := range cfg.Runs {
		for k, sink := range cfg.Sinks {
			srv := sinks[k]
			if err := w.emptyLedger(ctx); err != nil {
				return res, err
			}
			progress("round %d/%d, sink %s: digest run (%d connections)", i+1, cfg.Runs, sink, cfg.Concurrency)
			job, err := jobRun(ctx, w, srv, digestCmd, cfg, run)
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
		r.RoundTrips = sink.RoundTrips()
		if cfg.RTT > 0 {
			r.Bound = float64(cfg.Concurrency) / (float64(r.RoundTrips) * cfg.RTT.Seconds())
			r.BoundRatio = r.Job.PerSecond / r.Bound
			if r.Job.RunSeconds > 0 {
				r.RunBoundRatio = float64(r.Job.Messages) / r.Job.RunSeconds / r.Bound
			}
		}
		res.Sinks = append(res.Sinks, r)
	}
	return res, nil
}

// jobRun runs "digest run" once and measures it.
func jobRun(ctx context.Context, w *binaryWeek, srv *nullProcess, digestCmd func([]string, ...string) *exec.Cmd,
	cfg UserConfig, i int) (Sample, error) {
	s := Sample{Kind: "job"}
	app := fmt.Sprintf("digest-bench-run-%s-%d", randomHex(3), i)
	url, err := withParam(w.url, "application_name", app)
	if err != nil {
		return s, err
	}
	wal0, err := w.walLSN(ctx)
	if err != nil {
		return s, err
	}
	count0, srvCPU0, err := srv.count()
	if err != nil {
		return s, err
	}
	proxied := srv.proxied()
	args := []string{"run", "--week", cfg.Week.String()}
	if cfg.TraceDir != "" {
		args = append(args, "--trace", filepath.Join(cfg.TraceDir, fmt.Sprintf("run-%d.trace", i+1)))
	}
	cmd := digestCmd([]string{"DIGEST_DATABASE_URL=" + url, "DIGEST_SMTP_URL=smtp://" + srv.dialAddr() + "?tls=none"}, args...)
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
	sum, tail, _ := scanSummary(stderr)
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
	err = w.admin.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint,
(SELECT sum(pg_total_relation_size(relid))::bigint FROM pg_partition_tree('receipts')) + pg_total_relation_size('receipt_events')`, wal0).Scan(&wal, &ledger)
	if err != nil {
		return s, fmt.Errorf("bench: wal and ledger size: %w", err)
	}
	s.fill(int(sent), count1-count0, d, cmd.ProcessState, srvCPU1-srvCPU0, pgCPU)
	s.ProxiedBytes, s.ProxiedConns = proxied()
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
	proxied := srv.proxied()
	cmd := exec.CommandContext(ctx, cfg.Self, kind+"-loop", "--addr", srv.dialAddr(), "--eml", eml,
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
	s.ProxiedBytes, s.ProxiedConns = proxied()
	return s, nil
}

func (s *Sample) fill(messages int, received int64, d time.Duration, ps *os.ProcessState, srvCPU, pgCPU time.Duration) {
	us := func(c time.Duration) float64 { return float64(c.Microseconds()) / float64(messages) }
	s.Messages, s.Received, s.Seconds = messages, received, d.Seconds()
	s.PerSecond = float64(messages) / d.Seconds()
	s.ProcessCPU = us(ps.UserTime() + ps.SystemTime())
	s.ServerCPU, s.PostgresCPU = us(srvCPU), us(pgCPU)
	s.Cores = (s.ProcessCPU + s.ServerCPU + s.PostgresCPU) * float64(messages) / 1e6 / d.Seconds()
	s.PeakRSS = peakRSSOf(ps)
	s.Load = load1()
}

// peakRSSOf is the peak resident set of the exited process ps
// (getrusage's ru_maxrss), in MiB.
func peakRSSOf(ps *os.ProcessState) float64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return float64(ru.Maxrss) / 1024 // KiB on Linux
	}
	return 0
}

// scanSummary reads the run's JSON log to its end and returns the
// summary of its final line, the last lines for an error message, and its
// first warnings and errors (level WARN or ERROR: message and error), which
// a run that succeeds logs and goes on.
func scanSummary(r io.Reader) (sum map[string]any, tail string, warnings []string) {
	var lines []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil {
			if s, ok := line["summary"].(map[string]any); ok {
				sum = s
			}
			if lv := line["level"]; (lv == "WARN" || lv == "ERROR") && len(warnings) < maxWarnings {
				warnings = append(warnings, fmt.Sprintf("%v: %v", line["msg"], line["err"]))
			}
		}
		lines = append(lines, sc.Text())
		if len(lines) > 20 {
			lines = lines[1:]
		}
	}
	_, _ = io.Copy(io.Discard, r)
	return sum, strings.Join(lines, "\n"), warnings
}

// maxWarnings is how many of a run's warnings scanSummary keeps.
const maxWarnings = 5

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
		RunSeconds:  med(func(s Sample) float64 { return s.RunSeconds }),
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

// backendWatch follows the PostgreSQL backends of one or more runs,
// found by their application_name, and keeps the CPU time last read of
// each: a backend exits with its client, so it is read while it lives
// (every 20 ms; what a backend spends in its last moments after the final
// read is lost).
type backendWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	cpu    map[uint32]time.Duration
	app    map[uint32]string
}

// watchBackends follows the backends named app.
func watchBackends(ctx context.Context, databaseURL, app string) (*backendWatch, error) {
	return watchBackendsOf(ctx, databaseURL, []string{app})
}

// watchBackendsOf follows the backends of every name in apps, with one
// connection, for runs that go at the same time.
func watchBackendsOf(ctx context.Context, databaseURL string, apps []string) (*backendWatch, error) {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return nil, fmt.Errorf("bench: connect: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &backendWatch{cancel: cancel, done: make(chan struct{}), cpu: map[uint32]time.Duration{}, app: map[uint32]string{}}
	go func() {
		defer close(w.done)
		defer conn.Close(context.WithoutCancel(ctx))
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			if n%5 == 0 { // look for new backends every 100 ms
				w.find(ctx, conn, apps)
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

// find adds the backends of apps that are not followed yet.
func (w *backendWatch) find(ctx context.Context, conn *pgx.Conn, apps []string) {
	rows, err := conn.Query(ctx, `SELECT pid, application_name FROM pg_stat_activity WHERE application_name = ANY($1)`, apps)
	if err != nil {
		return
	}
	type backend struct {
		PID uint32
		App string
	}
	found, _ := pgx.CollectRows(rows, pgx.RowToStructByPos[backend])
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range found {
		if _, ok := w.cpu[b.PID]; !ok {
			w.cpu[b.PID], w.app[b.PID] = 0, b.App
		}
	}
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

// of returns, after stop, the CPU time and the number of the backends
// named app.
func (w *backendWatch) of(app string) (time.Duration, int) {
	var sum time.Duration
	var n int
	for p, c := range w.cpu {
		if w.app[p] == app {
			sum, n = sum+c, n+1
		}
	}
	return sum, n
}

func withParam(connString, key, value string) (string, error) {
	if !strings.HasPrefix(connString, "postgres://") && !strings.HasPrefix(connString, "postgresql://") {
		return connString + " " + key + "=" + value, nil
	}
	return setQuery(connString, key, value)
}
