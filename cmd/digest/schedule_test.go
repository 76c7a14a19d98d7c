package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/metrics"
)

// flakySMTP is an SMTP server that refuses every session (421) while
// refuse is set, and then accepts and counts messages.
type flakySMTP struct {
	addr     string
	refuse   atomic.Bool
	sessions atomic.Int64 // refused ones included
	accepted atomic.Int64
}

type countingSession struct{ s *flakySMTP }

func (countingSession) Reset()                               {}
func (countingSession) Logout() error                        { return nil }
func (countingSession) Mail(string, *smtp.MailOptions) error { return nil }
func (countingSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (c countingSession) Data(r io.Reader) error {
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	c.s.accepted.Add(1)
	return nil
}

func startFlakySMTP(t *testing.T) *flakySMTP {
	t.Helper()
	f := &flakySMTP{}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		f.sessions.Add(1)
		if f.refuse.Load() {
			return nil, &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 2}, Message: "relay down for maintenance"}
		}
		return countingSession{f}, nil
	}))
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = l.Addr().String()
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return f
}

// fakeClock is the schedule's clock: sleep advances it at once.
type fakeClock struct{ now atomic.Int64 }

func (c *fakeClock) Now() time.Time { return time.Unix(0, c.now.Load()).UTC() }
func (c *fakeClock) advance(d time.Duration) {
	c.now.Add(int64(d))
}

// A scheduled run that finds the relay refusing exits 3 with nothing
// sent; the schedule says so at WARN with the exit code and reason,
// /healthz answers 503 naming the week while it waits, and it retries the
// same week after --retry-min, which sends every digest once and makes
// /healthz ok again.
func TestScheduleRetriesAnIncompleteWeekUntilItCompletes(t *testing.T) {
	t.Parallel()
	relay := startFlakySMTP(t)
	relay.refuse.Store(true)
	dir := t.TempDir()
	vars := map[string]string{
		"DIGEST_HMAC_KEYS":   testKeys,
		"DIGEST_LEDGER_PATH": filepath.Join(dir, "digest.db"),
		"DIGEST_SMTP_URL":    "smtp://" + relay.addr + "?tls=none",
		"DIGEST_LOG_LEVEL":   "info",
	}
	clk := &fakeClock{}
	clk.now.Store(time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC).UnixNano()) // Monday of 2026-W49
	var logs bytes.Buffer
	env := &Env{Getenv: func(k string) string { return vars[k] }, Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &logs, Now: clk.Now}
	log := newLogger(env, slog.LevelInfo)

	reg := metrics.New()
	sm := reg.WithSchedule()
	health := &scheduleHealth{}
	hc := httptest.NewServer(metricsMux(reg, health))
	defer hc.Close()
	healthz := func() (int, string) {
		t.Helper()
		resp, err := http.Get(hc.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	weekly := func(t time.Time) time.Time { return t.Add(7 * 24 * time.Hour) }
	// No --week: the week before the clock's now, as a Monday tick runs it.
	s := newScheduler(env, env, []string{"--snapshot", "../../examples/snapshot.jsonl", "--deadline", "0"}, log, health, sm, weekly)
	s.jitter = func(d time.Duration) time.Duration { return d }
	var waits []time.Duration
	var during []string
	s.sleep = func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		code, body := healthz()
		during = append(during, body)
		if code != http.StatusServiceUnavailable {
			t.Errorf("/healthz while behind: %d %q; want 503", code, body)
		}
		clk.advance(d)
		relay.refuse.Store(false) // the relay is back
		return nil
	}
	s.tick(withScheduleMetrics(context.Background(), reg)) // as startScheduleMetrics hands it to the runs

	if len(waits) != 1 || waits[0] != defaultRetryMin {
		t.Fatalf("waits %v; want one retry after %s\n%s", waits, defaultRetryMin, logs.String())
	}
	if n := relay.accepted.Load(); n != 20 {
		t.Fatalf("the relay accepted %d messages; want the week's 20, once each\n%s", n, logs.String())
	}
	if len(during) != 1 || !strings.Contains(during[0], "2026-W48") || !strings.Contains(during[0], "exit 3") || !strings.Contains(during[0], "unreachable") {
		t.Errorf("/healthz while behind said %q; want the week, the exit code and the reason", during)
	}
	if code, body := healthz(); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz after the week completed: %d %q", code, body)
	}

	var warned, finished bool
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec struct {
			Level    string
			Msg      string
			Week     string
			ExitCode *int   `json:"exit_code"`
			Reason   string `json:"reason"`
			Retry    int    `json:"retry"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line not JSON: %q", line)
		}
		switch {
		case rec.Msg == "scheduled run left the week incomplete; retrying it":
			warned = rec.Level == "WARN" && rec.Week == "2026-W48" && rec.ExitCode != nil && *rec.ExitCode == ExitIncomplete &&
				strings.Contains(rec.Reason, "unreachable") && rec.Retry == 1
		case rec.Msg == "scheduled run finished":
			finished = rec.Level == "INFO" && rec.Week == "2026-W48" && rec.ExitCode != nil && *rec.ExitCode == ExitOK
		}
	}
	if !warned || !finished {
		t.Errorf("log: a WARN retry record with exit_code 3 and the reason %v, an INFO finish with exit_code 0 %v\n%s", warned, finished, logs.String())
	}
	mfs, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[mf.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	if got["digest_schedule_retries_total"] != 1 || got["digest_schedule_behind"] != 0 {
		t.Errorf("digest_schedule_retries_total %v, digest_schedule_behind %v; want 1 and 0", got["digest_schedule_retries_total"], got["digest_schedule_behind"])
	}
	// The schedule serves the week's state as a run would push it: the
	// alerts on digest_week_* (DigestNoRecentWeekComplete) see the week
	// complete, labelled by week.
	week := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "week" && l.GetValue() == "2026-W48" && strings.HasPrefix(mf.GetName(), "digest_week_") {
					week[mf.GetName()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	if week["digest_week_complete"] != 1 || week["digest_week_end_timestamp_seconds"] != float64(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC).Unix()) {
		t.Errorf("week state served by the schedule: %v; want 2026-W48 complete, ending 2026-11-30", week)
	}
}

// While the week's run keeps exiting 3, the schedule retries it with
// doubling waits capped at --retry-max, always for the same week, and
// stops when the next retry would not start before the next tick: then it
// logs an ERROR naming the backfill command and /healthz stays 503 until
// a later run settles.
func TestScheduleBacksOffAndGivesUpAtTheNextTick(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{}
	start := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	clk.now.Store(start.UnixNano())
	var logs bytes.Buffer
	health := &scheduleHealth{}
	s := &scheduler{
		log: slog.New(slog.NewJSONHandler(&logs, nil)), now: clk.Now,
		next:     func(t time.Time) time.Time { return start.Add(2 * time.Hour) },
		retryMin: 5 * time.Minute, retryMax: 30 * time.Minute, jitter: func(d time.Duration) time.Duration { return d },
		health: health, metrics: metrics.New().WithSchedule(),
	}
	week := digest.ISOWeek{Year: 2026, Week: 48}
	var args [][]string
	s.run = func(_ context.Context, extra ...string) (int, digest.ISOWeek, string) {
		args = append(args, extra)
		return ExitIncomplete, week, "incomplete (deadline reached): 7 digests pending; the next run continues"
	}
	var waits []time.Duration
	s.sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); clk.advance(d); return nil }
	s.tick(context.Background())

	// 5+10+20+30+30 = 95m; the next 30m would end at 125m, past the tick at 120m.
	want := []time.Duration{5 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute, 30 * time.Minute}
	if len(waits) != len(want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
	for _, a := range args[1:] {
		if strings.Join(a, " ") != "--week 2026-W48" {
			t.Fatalf("a retry ran with %q; want the same week", a)
		}
	}
	if r := health.behind(); !strings.Contains(r, "2026-W48") || !strings.Contains(r, "exit 3") {
		t.Errorf("health after giving up: %q; want behind, naming the week", r)
	}
	if !strings.Contains(logs.String(), `"level":"WARN","msg":"scheduled run left the week incomplete; retrying it","week":"2026-W48","exit_code":3`) {
		t.Errorf("no WARN retry record with the week and exit code 3:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `"level":"ERROR","msg":"scheduled run: giving up on the week, the next tick is due; backfill it: digest run --week 2026-W48"`) {
		t.Errorf("no ERROR record naming the backfill:\n%s", logs.String())
	}

	// A later run that completes makes it healthy again.
	s.run = func(context.Context, ...string) (int, digest.ISOWeek, string) { return ExitOK, week, "" }
	s.tick(context.Background())
	if r := health.behind(); r != "" {
		t.Errorf("health after a complete run: %q", r)
	}
}

// The backoff doubles from --retry-min to --retry-max and stays there,
// however many retries a week takes (an hourly retry for a week is 168).
func TestScheduleBackoffIsBounded(t *testing.T) {
	t.Parallel()
	s := &scheduler{retryMin: 5 * time.Minute, retryMax: time.Hour}
	for n, want := range map[int]time.Duration{1: 5 * time.Minute, 2: 10 * time.Minute, 4: 40 * time.Minute, 5: time.Hour, 40: time.Hour, 1000: time.Hour} {
		if got := s.backoff(n); got != want {
			t.Errorf("backoff(%d) = %s, want %s", n, got, want)
		}
	}
}

// The jitter takes at most a fifth off a wait, never adds to it.
func TestScheduleJitter(t *testing.T) {
	t.Parallel()
	seen := map[time.Duration]bool{}
	for range 200 {
		d := jitter(time.Hour)
		if d > time.Hour || d < 48*time.Minute {
			t.Fatalf("jitter(1h) = %s", d)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Fatalf("jitter(1h) took %d distinct values in 200 draws", len(seen))
	}
}
