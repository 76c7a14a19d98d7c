package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/weeklydigest/digest/digest"
)

// pushgateway implements the Pushgateway's push API for tests:
// PUT (replace the group) and POST (replace the metric families pushed,
// keep the others) on /metrics/job/<job>{/<label>/<value>}, with label
// values base64-encoded after a "@base64" suffix, and the body in any
// exposition format expfmt decodes.
type pushgateway struct {
	t      *testing.T
	mu     sync.Mutex
	groups map[string]map[string]*dto.MetricFamily // grouping key -> name -> family
	pushes int
}

func newPushgateway(t *testing.T) (*pushgateway, *httptest.Server) {
	pg := &pushgateway{t: t, groups: map[string]map[string]*dto.MetricFamily{}}
	srv := httptest.NewServer(pg)
	t.Cleanup(srv.Close)
	return pg, srv
}

func (pg *pushgateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut && r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	key, err := groupingKey(r.URL.EscapedPath())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || (mt != "application/vnd.google.protobuf" && mt != "text/plain") {
		http.Error(w, fmt.Sprintf("unsupported Content-Type %q", r.Header.Get("Content-Type")), http.StatusUnsupportedMediaType)
		return
	}
	dec := expfmt.NewDecoder(r.Body, expfmt.ResponseFormat(r.Header))
	pushed := map[string]*dto.MetricFamily{}
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); err == io.EOF {
			break
		} else if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		pushed[mf.GetName()] = mf
	}
	pg.mu.Lock()
	defer pg.mu.Unlock()
	pg.pushes++
	if r.Method == http.MethodPut || pg.groups[key] == nil {
		pg.groups[key] = map[string]*dto.MetricFamily{}
	}
	maps.Copy(pg.groups[key], pushed)
	w.WriteHeader(http.StatusOK)
}

// groupingKey turns /metrics/job/digest/week/2026-W48/mode/enforce into
// "job=digest,mode=enforce,week=2026-W48": the job, then the labels sorted
// by name (a group is a label set; the order in the URL does not matter),
// with base64 values decoded.
func groupingKey(path string) (string, error) {
	rest, ok := strings.CutPrefix(path, "/metrics/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts)%2 != 0 || parts[0] != "job" && parts[0] != "job@base64" {
		return "", fmt.Errorf("bad push path %q", path)
	}
	var kv []string
	for i := 0; i < len(parts); i += 2 {
		name, val := parts[i], parts[i+1]
		if n, ok := strings.CutSuffix(name, "@base64"); ok {
			b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(val, "="))
			if err != nil {
				return "", fmt.Errorf("label %s: %v", n, err)
			}
			name, val = n, string(b)
		}
		kv = append(kv, name+"="+val)
	}
	slices.Sort(kv[1:])
	return strings.Join(kv, ","), nil
}

func (pg *pushgateway) pushCount() int {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	return pg.pushes
}

// value returns the value of the sample of name whose labels include the
// given name=value pairs; ok is false when there is none.
func (pg *pushgateway) value(group, name string, labels ...string) (float64, bool) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	return sampleValue(pg.groups[group][name], labels...)
}

func sampleValue(mf *dto.MetricFamily, labels ...string) (float64, bool) {
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		for i := 0; i < len(labels); i += 2 {
			if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == labels[i] && l.GetValue() == labels[i+1] }) {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// metricsEnv is an embedded-default environment in a temporary directory.
func metricsEnv(t *testing.T, vars map[string]string) (*Env, *bytes.Buffer) {
	dir := t.TempDir()
	all := map[string]string{"DIGEST_LEDGER_PATH": filepath.Join(dir, "digest.db"), "DIGEST_OUTBOX_DIR": filepath.Join(dir, "outbox"), "DIGEST_LOG_LEVEL": "info"}
	maps.Copy(all, vars)
	stderr := &bytes.Buffer{}
	return &Env{Getenv: func(k string) string { return all[k] }, Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: stderr}, stderr
}

const week48 = "job=digest,mode=enforce,shard=all,week=2026-W48"

type wantSample struct {
	name   string
	labels []string
	want   float64
}

func checkSamples(t *testing.T, pg *pushgateway, group string, wants []wantSample) {
	t.Helper()
	for _, w := range wants {
		got, ok := pg.value(group, w.name, w.labels...)
		if !ok || got != w.want {
			t.Errorf("%s %s%v = %v (present %v), want %v", group, w.name, w.labels, got, ok, w.want)
		}
	}
}

func TestRunAndPrunePushMetrics(t *testing.T) {
	t.Parallel()
	pg, srv := newPushgateway(t)
	env, stderr := metricsEnv(t, map[string]string{"DIGEST_PUSHGATEWAY_URL": srv.URL})
	ctx := context.Background()
	run := func(snapshot string, want int) {
		t.Helper()
		if code := Main(ctx, []string{"run", "--snapshot", snapshot, "--week", "2026-W48"}, env); code != want {
			t.Fatalf("run exit %d, want %d; stderr:\n%s", code, want, stderr)
		}
	}

	start := time.Now()
	run("../../examples/snapshot.jsonl", ExitOK)
	checkSamples(t, pg, week48, []wantSample{
		{"digest_digests_total", []string{"outcome", "sent"}, 20},
		{"digest_digests_total", []string{"outcome", "skipped"}, 1},
		{"digest_digests_total", []string{"outcome", "suppressed"}, 1}, // cust_0022 unsubscribed
		{"digest_digests_total", []string{"outcome", "duplicate"}, 0},
		{"digest_digests_total", []string{"outcome", "quarantined"}, 0},
		{"digest_lookups_total", []string{"result", "found"}, 0},
		{"digest_duplicate_hits_total", []string{"age", "under_5m"}, 0},
		{"digest_temporary_retries_total", nil, 0},
		{"digest_claim_latency_seconds", nil, 20},
		{"digest_receipts", []string{"state", "sent"}, 20},
		{"digest_receipts", []string{"state", "held"}, 0},
		{"digest_receipts", []string{"state", "quarantined"}, 0},
		{"digest_oldest_retryable_timestamp_seconds", nil, 0},
		{"digest_pending", nil, 0},
		{"digest_run_exit_code", nil, 0},
	})
	calls, _ := pg.value(week48, "digest_ledger_calls_total")
	dur, _ := pg.value(week48, "digest_run_duration_seconds")
	first, ok := pg.value(week48, "digest_last_success_timestamp_seconds")
	if calls < 1 || dur <= 0 || !ok || first < float64(start.Unix()) {
		t.Errorf("ledger calls %v, duration %v, last success %v (present %v): want > 0 and a time of this run", calls, dur, first, ok)
	}

	run("../../examples/snapshot.jsonl", ExitOK)
	checkSamples(t, pg, week48, []wantSample{
		{"digest_digests_total", []string{"outcome", "sent"}, 0},
		{"digest_digests_total", []string{"outcome", "duplicate"}, 20},
		{"digest_duplicate_hits_total", []string{"age", "under_5m"}, 20},
		{"digest_receipts", []string{"state", "sent"}, 20},
	})
	second, _ := pg.value(week48, "digest_last_success_timestamp_seconds")

	// A changed snapshot quarantines one digest: exit 4, and the failed
	// run's push keeps the last success time of the run before.
	changed := filepath.Join(t.TempDir(), "changed.jsonl")
	b, err := os.ReadFile("../../examples/snapshot.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(changed, bytes.Replace(b, []byte("Salary November"), []byte("Salary November (corrected)"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	run(changed, ExitReview)
	checkSamples(t, pg, week48, []wantSample{
		{"digest_digests_total", []string{"outcome", "quarantined"}, 1},
		{"digest_digests_total", []string{"outcome", "duplicate"}, 19},
		{"digest_receipts", []string{"state", "quarantined"}, 1},
		{"digest_run_exit_code", nil, ExitReview},
		{"digest_last_success_timestamp_seconds", nil, second},
	})

	// Prune pushes to its own group; held and quarantined receipts stay.
	ageLedger(t, env.Getenv("DIGEST_LEDGER_PATH"), 100*24*time.Hour)
	if code := Main(ctx, []string{"prune", "--older-than", "90d"}, env); code != ExitOK {
		t.Fatalf("prune exit %d; stderr:\n%s", code, stderr)
	}
	checkSamples(t, pg, "job=digest,command=prune", []wantSample{{"digest_receipts_pruned_total", nil, 19}})
	if _, ok := pg.value("job=digest,command=prune", "digest_last_prune_timestamp_seconds"); !ok {
		t.Error("prune pushed no digest_last_prune_timestamp_seconds")
	}
	// The oldest row of each kept table, as the prune left them: the
	// held and quarantined receipts of 2026-W48, nothing else.
	w48 := float64(digest.ISOWeek{Year: 2026, Week: 48}.Start(time.UTC).Unix())
	checkSamples(t, pg, "job=digest,command=prune", []wantSample{
		{"digest_ledger_oldest_row_timestamp_seconds", []string{"table", "receipts"}, w48},
		{"digest_ledger_oldest_row_timestamp_seconds", []string{"table", "observations"}, 0},
		{"digest_ledger_oldest_row_timestamp_seconds", []string{"table", "provider_events"}, 0},
		{"digest_ledger_oldest_row_timestamp_seconds", []string{"table", "soft_bounces"}, 0},
	})
	if code := Main(ctx, []string{"prune", "--older-than", "90d", "--dry-run"}, env); code != ExitOK || pg.pushCount() != 7 {
		t.Errorf("dry-run prune: exit %d, %d pushes in all; want 0 and no push (7: three runs and their week states, one prune)", code, pg.pushCount())
	}
}

// ageLedger moves the SQLite ledger at path back by d: its receipts' last
// updates and its weeks' last runs, as if d had passed.
func ageLedger(t *testing.T, path string, d time.Duration) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`UPDATE receipts SET updated_at = updated_at - ?`, `UPDATE week_runs SET last_started_at = last_started_at - ?`} {
		if _, err := db.Exec(q, d.Microseconds()); err != nil {
			t.Fatal(err)
		}
	}
}

// cancelOnLog cancels a context when a log line contains a marker: a
// signal that arrives in the middle of a run, without timing.
type cancelOnLog struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	cancel context.CancelFunc
}

func (c *cancelOnLog) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if bytes.Contains(p, []byte(c.marker)) {
		c.cancel()
	}
	return c.buf.Write(p)
}

func (c *cancelOnLog) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func TestInterruptedRunStillPushes(t *testing.T) {
	t.Parallel()
	pg, srv := newPushgateway(t)
	env, _ := metricsEnv(t, map[string]string{"DIGEST_PUSHGATEWAY_URL": srv.URL, "JOB_COMPLETION_INDEX": "1"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// SIGTERM as the run starts: the run stops claiming and returns, and
	// the push still goes out on a context of its own. --lenient skips the
	// snapshot's up-front check, which reports a signal that lands during it
	// as a refused snapshot (exit 1) rather than an interrupted run.
	stderr := &cancelOnLog{marker: `"msg":"run starting"`, cancel: cancel}
	env.Stderr = stderr
	code := Main(ctx, []string{"run", "--snapshot", "../../examples/snapshot.jsonl", "--week", "2026-W48", "--shard", "/2", "--lenient"}, env)
	if code != ExitIncomplete {
		t.Fatalf("interrupted run exit %d, want %d; stderr:\n%s", code, ExitIncomplete, stderr)
	}
	group := "job=digest,mode=enforce,shard=1/2,week=2026-W48"
	checkSamples(t, pg, group, []wantSample{{"digest_run_exit_code", nil, ExitIncomplete}})
	if _, ok := pg.value(group, "digest_digests_total", "outcome", "sent"); !ok {
		t.Error("the interrupted run pushed no digest_digests_total")
	}
	if _, ok := pg.value(group, "digest_last_success_timestamp_seconds"); ok {
		t.Error("an interrupted run set the last success time")
	}
}

func TestScheduleServesMetricsAndHealth(t *testing.T) {
	t.Parallel()
	pg, srv := newPushgateway(t)
	// Scheduled runs record into the served registry and never push.
	env, stderr := metricsEnv(t, map[string]string{"DIGEST_PUSHGATEWAY_URL": srv.URL})
	reg := newScheduleRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, stop, err := serveMetrics(ctx, "127.0.0.1:0", reg, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	base := "http://" + addr.String()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}

	runCtx := withScheduleMetrics(ctx, reg)
	for range 2 {
		if code := Main(runCtx, []string{"run", "--snapshot", "../../examples/snapshot.jsonl", "--week", "2026-W48"}, env); code != ExitOK {
			t.Fatalf("run exit %d; stderr:\n%s", code, stderr)
		}
	}
	code, body := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	// The counters are the last run's, as a push leaves them: the second
	// run sent nothing and found all 20 sent.
	for _, w := range []wantSample{
		{"digest_digests_total", []string{"outcome", "sent"}, 0},
		{"digest_digests_total", []string{"outcome", "duplicate"}, 20},
		{"digest_digests_total", []string{"outcome", "skipped"}, 1},
		{"digest_claim_latency_seconds", nil, 20},
		{"digest_receipts", []string{"state", "sent"}, 20},
		{"digest_run_exit_code", nil, 0},
	} {
		if got, ok := sampleValue(fams[w.name], w.labels...); !ok || got != w.want {
			t.Errorf("%s%v = %v (present %v), want %v", w.name, w.labels, got, ok, w.want)
		}
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_inuse_bytes", "process_resident_memory_bytes", "process_start_time_seconds"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("/metrics has no %s: schedule is a long-lived process", name)
		}
	}
	if _, ok := fams["digest_last_success_timestamp_seconds"]; !ok {
		t.Error("/metrics has no digest_last_success_timestamp_seconds after a successful run")
	}
	if n := pg.pushCount(); n != 0 {
		t.Errorf("scheduled runs pushed %d times; want 0", n)
	}
}
