package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/weeklydigest/digest/internal/e2etest"
	"github.com/weeklydigest/digest/snapshot"
)

// collector is an OTLP/HTTP trace collector in the test: it decodes each
// protobuf export and keeps its spans, with their service's name, and
// the names of the metrics a run sends at its end (/v1/metrics).
type collector struct {
	URL     string
	mu      sync.Mutex
	spans   []*tracepb.Span
	service []string
	metrics []string
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	c := &collector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/metrics" {
			c.metricsExport(t, w, body)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
			t.Errorf("collector: %s %s (%s): %v", r.Method, r.URL.Path, r.Header.Get("Content-Type"), err)
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					c.service = append(c.service, a.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				c.spans = append(c.spans, ss.Spans...)
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

// metricsExport keeps the names of the metrics of one export.
func (c *collector) metricsExport(t *testing.T, w http.ResponseWriter, body []byte) {
	var req colmetricpb.ExportMetricsServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		t.Errorf("collector: metrics: %v", err)
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rm := range req.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				c.metrics = append(c.metrics, m.GetName())
			}
		}
	}
}

func (c *collector) collected() ([]*tracepb.Span, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spans, c.service
}

// attrs returns a span's attributes as strings.
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = strconv.FormatBool(v.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.Key] = strconv.FormatFloat(v.DoubleValue, 'g', -1, 64)
		default:
			m[kv.Key] = kv.GetValue().String()
		}
	}
	return m
}

// tracedEnv is an embedded run (SQLite ledger, file outbox) of n synthetic
// customers, with its snapshot's addresses and names: what no span may
// carry.
func tracedEnv(t *testing.T, n int, otel ...string) (e *e2etest.Env, snap string, private []string) {
	t.Helper()
	dir := t.TempDir()
	snap = filepath.Join(dir, "snapshot.jsonl")
	f, err := os.Create(snap)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.WriteJSONL(f, snapshot.Synthetic(n, week40, 1)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for r := range snapshot.Synthetic(n, week40, 1) {
		private = append(private, r.Customer.Email, r.Customer.Name)
	}
	e = e2etest.Bare(t, dir)
	e.Vars = append([]string{"DIGEST_HMAC_KEYS=" + e2etest.TestKeyring, "DIGEST_LEDGER_PATH=ledger.db",
		"DIGEST_OUTBOX_DIR=outbox", "DIGEST_LOG_LEVEL=info", "DIGEST_DATABASE_URL=", "DIGEST_SMTP_URL="}, otel...)
	return e, snap, private
}

// A run with OTEL_EXPORTER_OTLP_ENDPOINT set sends its spans to the
// collector at exit: one trace, the run's span over its passes, each over
// its claim batches, start chunks and finish batches, with the run's
// week, type, version, shard and mode, each batch's size and outcomes. No
// attribute or event holds a customer's address or name, and the log
// lines made under a span carry the run's trace id, as does the summary
// ("run finished", after the run) with the run span's id.
func TestRunSendsItsSpansToAnOTLPCollector(t *testing.T) {
	t.Parallel()
	c := newCollector(t)
	e, snap, private := tracedEnv(t, 120, "OTEL_EXPORTER_OTLP_ENDPOINT="+c.URL, "OTEL_SERVICE_NAME=digest-e2e")
	r := e.Run("run", "--snapshot", snap, "--week", "2026-W40", "--batch-size", "25")
	if r.Code != 0 {
		t.Fatalf("run: exit %d\n%s", r.Code, r.Stderr)
	}
	spans, services := c.collected()
	for _, s := range services {
		if s != "digest-e2e" {
			t.Errorf("service.name %q, want OTEL_SERVICE_NAME's digest-e2e", s)
		}
	}
	// The run's final metrics came too, once (cmd/digest's tests check
	// their values).
	c.mu.Lock()
	metrics := c.metrics
	c.mu.Unlock()
	if n := strings.Count(strings.Join(metrics, " ")+" ", "digest_digests_total "); n != 1 {
		t.Errorf("the collector got digest_digests_total %d times (metrics %v); want once, at the run's end", n, metrics)
	}

	byID := map[string]*tracepb.Span{}
	var root *tracepb.Span
	count := map[string]int{}
	for _, s := range spans {
		byID[string(s.SpanId)] = s
		count[s.Name]++
		if s.Name == "digest run" {
			root = s
		}
	}
	if root == nil || len(root.ParentSpanId) != 0 {
		t.Fatalf("no root span \"digest run\" among %v", count)
	}
	want := map[string]string{"digest.week": "2026-W40", "digest.type": "weekly_activity", "digest.version": "v1", "digest.shard": "all", "digest.mode": "enforce"}
	got := attrs(root.Attributes)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("run span: %s = %q, want %q", k, got[k], v)
		}
	}
	if sent := r.Count(t, "sent"); got["run.sent"] != strconv.Itoa(sent) || sent == 0 {
		t.Errorf("run span: run.sent = %q, the summary says %d", got["run.sent"], sent)
	}
	if count["digest run"] != 1 || count["pass"] != 1 || count["claim batch"] < 2 || count["start chunk"] < 2 || count["finish batch"] < 1 {
		t.Errorf("spans by name %v; want one run and pass, claim batches and start chunks", count)
	}
	var claimed int
	for _, s := range spans {
		if string(s.TraceId) != string(root.TraceId) {
			t.Errorf("span %q is in another trace", s.Name)
		}
		parent := byID[string(s.ParentSpanId)]
		a := attrs(s.Attributes)
		switch s.Name {
		case "pass":
			if parent != root {
				t.Errorf("pass span's parent is not the run's")
			}
		case "claim batch", "start chunk", "finish batch":
			if parent == nil || parent.Name != "pass" {
				t.Errorf("%s span's parent is not a pass", s.Name)
			}
			if a["batch.size"] == "" || a["batch.size"] == "0" {
				t.Errorf("%s span lacks its batch.size: %v", s.Name, a)
			}
			if s.Name == "claim batch" {
				n, _ := strconv.Atoi(a["claim.claimed"])
				claimed += n
			}
		}
		var texts []string
		for _, v := range a {
			texts = append(texts, v)
		}
		for _, ev := range s.Events {
			texts = append(texts, ev.Name)
			for _, v := range attrs(ev.Attributes) {
				texts = append(texts, v)
			}
		}
		for _, text := range texts {
			for _, p := range private {
				if strings.Contains(text, p) {
					t.Errorf("span %q holds customer text %q: %q", s.Name, p, text)
				}
			}
		}
	}
	if claimed != r.Count(t, "sent") {
		t.Errorf("claim batches claimed %d keys; the run sent %d", claimed, r.Count(t, "sent"))
	}

	runTrace := hex.EncodeToString(root.TraceId)
	traced := 0
	for line := range strings.Lines(r.Stderr) {
		var l struct {
			Msg     string `json:"msg"`
			TraceID string `json:"trace_id"`
			SpanID  string `json:"span_id"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Errorf("stderr line is not JSON: %q", line)
			continue
		}
		if l.TraceID != "" {
			traced++
			if l.TraceID != runTrace || byID[string(mustHex(t, l.SpanID))] == nil {
				t.Errorf("log line %q: trace_id %s span_id %s; want the run's trace %s and one of its spans", l.Msg, l.TraceID, l.SpanID, runTrace)
			}
		}
		if (l.Msg == "run starting" || l.Msg == "run finished") && (l.TraceID != runTrace || l.SpanID != hex.EncodeToString(root.SpanId)) {
			t.Errorf("%q names trace %q span %q; want the run span %s/%x", l.Msg, l.TraceID, l.SpanID, runTrace, root.SpanId)
		}
	}
	if traced == 0 {
		t.Errorf("no log line carries a trace id:\n%s", r.Stderr)
	}
}

// A collector that accepts connections and never answers delays the exit
// by the bounded flush at most, and changes nothing of the run: exit 0,
// every digest sent, one warning that the spans were not delivered.
func TestUnreachableCollectorNeverFailsTheRun(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var held []net.Conn // read nothing, answer nothing, until the test ends
		for {
			conn, err := l.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, conn)
		}
	}()
	e, snap, _ := tracedEnv(t, 40, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+l.Addr().String())
	r := e.Run("run", "--snapshot", snap, "--week", "2026-W40")
	if r.Code != 0 || r.Count(t, "sent") != len(e2etest.Wanted(t, 40, week40)) {
		t.Fatalf("run: exit %d, sent %d; want 0 and every digest\n%s", r.Code, r.Count(t, "sent"), r.Stderr)
	}
	if !strings.Contains(r.Stderr, "spans not delivered") || !strings.Contains(r.Stderr, "deadline") {
		t.Errorf("no warning that the flush gave up at its deadline:\n%s", r.Stderr)
	}
}

// SIGTERM: the interrupted run's spans still reach the collector, its
// run span marked interrupted.
func TestSIGTERMFlushesTheSpans(t *testing.T) {
	t.Parallel()
	c := newCollector(t)
	e, snap, _ := tracedEnv(t, 300, "OTEL_EXPORTER_OTLP_ENDPOINT="+c.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := e.Command(ctx, []string{"DIGEST_RATE=100", "DIGEST_BURST=1"}, "run", "--snapshot", snap, "--week", "2026-W40")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e2etest.WaitFor(t, time.Minute, "some digests in the outbox", func() bool {
		m, _ := filepath.Glob(filepath.Join(e.Dir, "outbox", "*.eml"))
		return len(m) >= 10
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 3 {
		t.Fatalf("after SIGTERM: exit %d, want 3\n%s", code, stderr.String())
	}
	spans, _ := c.collected()
	for _, s := range spans {
		if s.Name == "digest run" {
			if a := attrs(s.Attributes); a["run.interrupted"] != "true" {
				t.Errorf("run span attributes %v; want run.interrupted true", a)
			}
			return
		}
	}
	t.Fatalf("no run span reached the collector after SIGTERM (%d spans)\n%s", len(spans), stderr.String())
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Errorf("%q is not hex", s)
	}
	return b
}
