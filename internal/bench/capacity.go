package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// CapacityConfig says what MeasureCapacity measures: one week sent by
// Shards "digest run --shard i/Shards" processes at once (the shape of the
// Kubernetes Indexed Job) on one PostgreSQL, against one null SMTP server
// process.
type CapacityConfig struct {
	// DatabaseURL is the PostgreSQL server and database; the measurement
	// works in a schema of its own there. Required.
	DatabaseURL string
	// Schema to use; empty: a fresh bench_<random> one, dropped at the
	// end. A named schema is kept and its seeded customers reused when
	// their number matches; its ledger is emptied before the run.
	Schema string
	// DigestBin is the digest binary to run. Required.
	DigestBin string
	// Self is the digest-bench executable, which runs the null SMTP
	// server ("null-smtp"). Required.
	Self string
	// Customers to seed. Default 100,000.
	Customers int
	// Shards: how many shard processes run the week. Default 8.
	Shards int
	// Concurrency: SMTP connections of each shard (DIGEST_CONCURRENCY).
	// Default 4.
	Concurrency int
	// Week of the seeded activity. Default DefaultWeek.
	Week digest.ISOWeek
	// Progress, when set, receives one line per phase.
	Progress io.Writer
}

// Validate fills in the defaults and checks the rest: the errors are the
// caller's mistakes. MeasureCapacity calls it.
func (c *CapacityConfig) Validate() error {
	if c.Customers == 0 {
		c.Customers = 100_000
	}
	if c.Shards == 0 {
		c.Shards = 8
	}
	if c.Concurrency == 0 {
		c.Concurrency = 4
	}
	if c.Shards < 1 || c.Shards > 64 {
		return fmt.Errorf("bench: shards %d: want 1 to 64", c.Shards)
	}
	return checkBinaryWeek(&c.Week, &c.Progress, c.DatabaseURL, c.DigestBin, c.Self, c.Schema, c.Customers, c.Concurrency)
}

// ShardRun is one shard process of the week.
type ShardRun struct {
	Shard    string  `json:"shard"` // "i/n", as given to --shard
	Sent     int     `json:"sent"`  // its summary's count
	Seconds  float64 `json:"seconds"`
	ExitCode int     `json:"exit_code"`
	// CPU per digest sent, in microseconds: the process's own and its
	// PostgreSQL backends'.
	ProcessCPU  float64 `json:"process_cpu_us"`
	PostgresCPU float64 `json:"postgres_cpu_us"`
	Backends    int     `json:"postgres_backends"`
	// PeakRSS is the process's peak resident set (ru_maxrss), in MiB.
	PeakRSS float64 `json:"peak_rss_mib"`
	// Warnings are the first of its log's warnings and errors: a run
	// that exits 0 may still have failed to record what status reads.
	Warnings []string `json:"warnings,omitempty"`
}

// Table is one relation of the ledger or the source after the run.
type Table struct {
	Name  string `json:"name"`
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"` // with indexes and TOAST
}

// Timed is one "digest" command after the run.
type Timed struct {
	Command  string  `json:"command"`
	Seconds  float64 `json:"seconds"`
	ExitCode int     `json:"exit_code"`
	// Outcome: status's verdict, or prune's first line.
	Outcome string `json:"outcome"`
	// CountedFrom is status's "ledger" (the week's counters) or "source"
	// (a read of the source and of every receipt of the week), and
	// SourceReason why it read the source.
	CountedFrom  string `json:"counted_from,omitempty"`
	SourceReason string `json:"source_reason,omitempty"`
	// PeakRSS is the command's peak resident set (ru_maxrss), in MiB.
	PeakRSS float64 `json:"peak_rss_mib"`
}

// CapacityResult is what MeasureCapacity measured.
type CapacityResult struct {
	Customers   int    `json:"customers"`
	Shards      int    `json:"shards"`
	Concurrency int    `json:"concurrency_per_shard"`
	Week        string `json:"week"`
	// SeedSeconds is how long "digest seed" took; 0 when the schema's
	// customers were reused.
	SeedSeconds float64    `json:"seed_seconds"`
	Runs        []ShardRun `json:"shard_runs"`
	// Seconds is the wall time from the first shard's start to the last
	// one's exit.
	Seconds   float64 `json:"seconds"`
	Sent      int     `json:"sent"`     // the shards' sent, summed
	Received  int64   `json:"received"` // counted by the null server
	PerSecond float64 `json:"per_second"`
	// Receipts are the week's receipts by state after the run.
	Receipts map[string]int64 `json:"receipts"`
	// CPU per digest in microseconds, all shards: the shard processes,
	// their PostgreSQL backends and the null SMTP server.
	ProcessCPU  float64 `json:"process_cpu_us"`
	PostgresCPU float64 `json:"postgres_cpu_us"`
	ServerCPU   float64 `json:"server_cpu_us"`
	// Cores is that CPU time over the wall time.
	Cores float64 `json:"cpu_cores"`
	// WALBytes is the WAL written during the run per digest, cluster-wide
	// (other clients' writes count too).
	WALBytes float64 `json:"wal_bytes_per_digest"`
	// Load is /proc/loadavg's 1-minute average before and after the run.
	LoadBefore float64 `json:"load1_before"`
	LoadAfter  float64 `json:"load1_after"`
	Tables     []Table `json:"tables"`
	// Status is "digest status" of the week and of its first shard.
	Status      Timed `json:"status"`
	StatusShard Timed `json:"status_shard"`
	// AgeSeconds is how long the SQL took that ages the week's receipts
	// and runs by 400 days, so that a prune may take them: not part of a
	// prune, reported so that the bench's own time adds up.
	AgeSeconds float64 `json:"age_seconds"`
	Prune      Timed   `json:"prune"`
}

// MeasureCapacity seeds the week with "digest seed" (or reuses the
// schema's customers), starts a null SMTP server process, runs Shards
// "digest run --shard i/Shards" processes at once against it and
// measures each, then times "digest status" of the whole week and of
// shard 0, ages the week's receipts and times "digest prune" of it.
// Shards that fail are reported in the result and as the error.
func MeasureCapacity(ctx context.Context, cfg CapacityConfig) (CapacityResult, error) {
	if err := cfg.Validate(); err != nil {
		return CapacityResult{}, err
	}
	res := CapacityResult{Customers: cfg.Customers, Shards: cfg.Shards, Concurrency: cfg.Concurrency, Week: cfg.Week.String()}
	progress := func(format string, args ...any) { fmt.Fprintf(cfg.Progress, "bench: "+format+"\n", args...) }
	w, err := openBinaryWeek(ctx, cfg.DatabaseURL, cfg.Schema, cfg.DigestBin, cfg.Customers, cfg.Concurrency, cfg.Week, progress)
	if err != nil {
		return res, err
	}
	defer w.close(ctx)
	res.SeedSeconds = w.seedTime.Seconds()
	if err := w.emptyLedger(ctx); err != nil {
		return res, err
	}
	srv, err := startNullProcess(cfg.Self, "", SinkChunking)
	if err != nil {
		return res, err
	}
	defer srv.stop()

	progress("%d shards at once: digest run --week %s --shard i/%d (%d connections each)", cfg.Shards, cfg.Week, cfg.Shards, cfg.Concurrency)
	// A shard that failed fails the measurement, but only at the end:
	// what status and prune make of the week it left is worth measuring.
	failed, err := runShards(ctx, w, srv, cfg, &res)
	if err != nil {
		return res, err
	}
	if err := ledgerAfter(ctx, w, &res); err != nil {
		return res, err
	}
	withDB := []string{"DIGEST_DATABASE_URL=" + w.url}
	progress("digest status --week %s", cfg.Week)
	res.Status = timeStatus(w.command(ctx, withDB, "status", "--week", cfg.Week.String(), "--json"))
	progress("digest status --week %s --shard 0/%d", cfg.Week, cfg.Shards)
	res.StatusShard = timeStatus(w.command(ctx, withDB, "status", "--week", cfg.Week.String(), "--shard", fmt.Sprintf("0/%d", cfg.Shards), "--json"))

	progress("ageing the week's receipts by 400 days")
	t0 := time.Now()
	if _, err := w.admin.Exec(ctx, "SET search_path TO "+w.name+`;
UPDATE receipts SET updated_at = updated_at - interval '400 days' WHERE iso_week = '`+cfg.Week.String()+`';
UPDATE week_runs SET last_started_at = last_started_at - interval '400 days' WHERE iso_week = '`+cfg.Week.String()+`'`); err != nil {
		return res, fmt.Errorf("bench: age the week: %w", err)
	}
	res.AgeSeconds = time.Since(t0).Seconds()
	progress("digest prune --older-than 90d")
	res.Prune = timePrune(w.command(ctx, withDB, "prune", "--older-than", "90d"))
	return res, failed
}

// runShards starts every shard process at once and measures each and
// the whole. Shards that failed are its first error, the measurement's
// own failures its second.
func runShards(ctx context.Context, w *binaryWeek, srv *nullProcess, cfg CapacityConfig, res *CapacityResult) (failed, err error) {
	id := randomHex(3)
	apps := make([]string, cfg.Shards)
	cmds := make([]*exec.Cmd, cfg.Shards)
	for i := range cmds {
		apps[i] = fmt.Sprintf("digest-bench-cap-%s-%d", id, i)
		url, err := withParam(w.url, "application_name", apps[i])
		if err != nil {
			return nil, err
		}
		cmds[i] = w.command(ctx, []string{"DIGEST_DATABASE_URL=" + url, "DIGEST_SMTP_URL=smtp://" + srv.addr + "?tls=none"},
			"run", "--week", cfg.Week.String(), "--shard", fmt.Sprintf("%d/%d", i, cfg.Shards))
	}
	wal0, err := w.walLSN(ctx)
	if err != nil {
		return nil, err
	}
	count0, srvCPU0, err := srv.count()
	if err != nil {
		return nil, err
	}
	backends, err := watchBackendsOf(ctx, cfg.DatabaseURL, apps)
	if err != nil {
		return nil, err
	}
	res.LoadBefore = load1()
	res.Runs = make([]ShardRun, cfg.Shards)
	tails := make([]string, cfg.Shards)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i, cmd := range cmds {
		r := &res.Runs[i]
		r.Shard = fmt.Sprintf("%d/%d", i, cfg.Shards)
		stderr, err := cmd.StderrPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			r.ExitCode, tails[i] = -1, err.Error()
			continue
		}
		wg.Go(func() {
			sum, tail, warnings := scanSummary(stderr)
			r.Warnings = warnings
			err := cmd.Wait()
			r.Seconds = time.Since(t0).Seconds()
			sent, _ := sum["sent"].(float64)
			r.Sent, r.ExitCode = int(sent), cmd.ProcessState.ExitCode()
			if err != nil {
				tails[i] = tail
			}
		})
	}
	wg.Wait()
	d := time.Since(t0)
	backends.stop()
	res.LoadAfter = load1()
	count1, srvCPU1, err := srv.count()
	if err != nil {
		return nil, err
	}
	var wal int64
	if err := w.admin.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, wal0).Scan(&wal); err != nil {
		return nil, fmt.Errorf("bench: wal: %w", err)
	}
	var procCPU, pgCPU time.Duration
	var lost []string
	for i, cmd := range cmds {
		r := &res.Runs[i]
		res.Sent += r.Sent
		if r.ExitCode != 0 {
			lost = append(lost, fmt.Sprintf("shard %s exited %d:\n%s", r.Shard, r.ExitCode, tails[i]))
		}
		if cmd.ProcessState == nil {
			continue
		}
		own := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		pg, n := backends.of(apps[i])
		procCPU, pgCPU = procCPU+own, pgCPU+pg
		r.ProcessCPU, r.PostgresCPU, r.Backends = perDigest(own, r.Sent), perDigest(pg, r.Sent), n
		r.PeakRSS = peakRSSOf(cmd.ProcessState)
	}
	res.Seconds = d.Seconds()
	res.Received = count1 - count0
	res.PerSecond = float64(res.Sent) / d.Seconds()
	srvCPU := srvCPU1 - srvCPU0
	res.ProcessCPU, res.PostgresCPU, res.ServerCPU = perDigest(procCPU, res.Sent), perDigest(pgCPU, res.Sent), perDigest(srvCPU, res.Sent)
	res.Cores = (procCPU + pgCPU + srvCPU).Seconds() / d.Seconds()
	if res.Sent > 0 {
		res.WALBytes = float64(wal) / float64(res.Sent)
	}
	if len(lost) > 0 {
		return fmt.Errorf("bench: %s", strings.Join(lost, "\n")), nil
	}
	return nil, nil
}

// perDigest is c per digest in microseconds (0 with none sent).
func perDigest(c time.Duration, sent int) float64 {
	if sent == 0 {
		return 0
	}
	return float64(c.Microseconds()) / float64(sent)
}

// ledgerAfter reads the week's receipts by state and the size of each
// non-empty ledger and source table.
func ledgerAfter(ctx context.Context, w *binaryWeek, res *CapacityResult) error {
	rows, err := w.admin.Query(ctx, "SELECT state, count(*) FROM "+w.name+".receipts WHERE iso_week = $1 GROUP BY state", res.Week)
	if err != nil {
		return fmt.Errorf("bench: receipts by state: %w", err)
	}
	res.Receipts = map[string]int64{}
	for rows.Next() {
		var state string
		var n int64
		if err := rows.Scan(&state, &n); err != nil {
			return err
		}
		res.Receipts[state] = n
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("bench: receipts by state: %w", err)
	}
	var names []string
	err = w.admin.QueryRow(ctx, `SELECT array_agg(relid::text ORDER BY relid::text) FROM pg_partition_tree($1::regclass)
WHERE isleaf AND pg_relation_size(relid) > 0`, w.name+".receipts").Scan(&names)
	if err != nil {
		return fmt.Errorf("bench: receipts partitions: %w", err)
	}
	for _, t := range []string{"receipt_events", "digest_customers", "digest_activity"} {
		names = append(names, w.name+"."+t)
	}
	for _, name := range names {
		t := Table{Name: strings.TrimPrefix(name, w.name+".")}
		err := w.admin.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+name+"), pg_total_relation_size($1::regclass)", name).Scan(&t.Rows, &t.Bytes)
		if err != nil {
			return fmt.Errorf("bench: size of %s: %w", name, err)
		}
		res.Tables = append(res.Tables, t)
	}
	return nil
}

// timeStatus runs a "digest status --json" and reads its verdict.
func timeStatus(cmd *exec.Cmd) Timed {
	t, out := timed(cmd)
	var st struct {
		Verdict      string `json:"verdict"`
		CountedFrom  string `json:"counted_from"`
		SourceReason string `json:"source_reason"`
	}
	if json.Unmarshal(out, &st) == nil && st.Verdict != "" {
		t.Outcome, t.CountedFrom, t.SourceReason = st.Verdict, st.CountedFrom, st.SourceReason
	}
	return t
}

// timePrune runs a "digest prune": its outcome is its first line ("pruned
// N receipts older than ...") and whether the week's partition went whole.
func timePrune(cmd *exec.Cmd) Timed {
	t, out := timed(cmd)
	if strings.Contains(string(out), "dropped whole") {
		t.Outcome += ", the partition dropped whole"
	}
	return t
}

// timed runs cmd and returns its duration, exit code and first line of
// output (of its error output when it printed nothing), and its output.
func timed(cmd *exec.Cmd) (Timed, []byte) {
	t := Timed{Command: commandLine(cmd)}
	t0 := time.Now()
	out, err := cmd.Output()
	t.Seconds = time.Since(t0).Seconds()
	t.ExitCode = exitCode(cmd, err)
	t.Outcome = firstLine(out, err)
	if cmd.ProcessState != nil {
		t.PeakRSS = peakRSSOf(cmd.ProcessState)
	}
	return t, out
}

func commandLine(cmd *exec.Cmd) string { return "digest " + strings.Join(cmd.Args[1:], " ") }

func exitCode(cmd *exec.Cmd, err error) int {
	if cmd.ProcessState != nil {
		return cmd.ProcessState.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func firstLine(out []byte, err error) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if line == "" && err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			line, _, _ = strings.Cut(strings.TrimSpace(string(ee.Stderr)), "\n")
		} else {
			line = err.Error()
		}
	}
	return line
}
