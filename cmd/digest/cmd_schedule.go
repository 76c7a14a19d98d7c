package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/metrics"
	"github.com/weeklydigest/digest/run"
)

const scheduleHelp = `Usage: digest schedule --cron "SPEC" [--retry-min D] [--retry-max D] [-- RUN FLAGS...]

Runs "digest run" on a cron schedule, for hosts without a Kubernetes
CronJob. SPEC has five fields (minute hour day-of-month month day-of-week)
and may start with CRON_TZ=Area/City; without it DIGEST_TZ applies. A run
never starts while the previous one is still going (that tick is skipped and
logged). SIGTERM stops the schedule: a run under way stops claiming and
finishes its sends within its grace period. Everything after -- goes to
each run unchanged; settings given to schedule itself (--tz, --type,
--version, --settle, --log-level) hold for its runs too.

A run that leaves its week incomplete (exit 3) or fails (exit 1) is
retried, for the same week, with exponential backoff from --retry-min,
doubling up to --retry-max, each wait with up to 20% random jitter, until
the week completes or the next tick is due (the next tick then runs the
week it is for). Meanwhile /healthz answers 503 naming the week, the exit
code and the reason, digest_schedule_behind is 1, and each retry is
logged (WARN after exit 3, ERROR after exit 1 and when the schedule gives
up on the week). Exit 2
(configuration) and 4 (rows need review) are not retried: a person has
to act.

Examples:
  digest schedule --cron "0 6 * * MON"
  digest schedule --cron "CRON_TZ=Europe/Berlin 0 6 * * MON" -- --deadline 45m --grace 30s
  digest schedule --cron "0 6 * * MON" --tz Europe/Berlin -- --snapshot /data/week.jsonl
  digest schedule --cron "0 6 * * MON" --retry-min 10m --retry-max 2h

Exit codes: 0 stopped by SIGTERM (after the run under way), 2 usage. A
run's own exit code is in its log records, never the schedule's.
`

func cmdSchedule(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "schedule", scheduleHelp)
	st := register(fs, env, "schedule")
	spec := fs.String("cron", "", "cron schedule, e.g. \"0 6 * * MON\" (required)")
	retryMin := fs.Duration("retry-min", defaultRetryMin, "first wait before retrying a week whose run exited 1 or 3; doubles each retry")
	retryMax := fs.Duration("retry-max", defaultRetryMax, "longest wait between retries of an incomplete week")
	pos, runArgs, err := parseRest(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: flags for each run go after --", pos[0])
	}
	if *spec == "" {
		return usagef("--cron is required, e.g. --cron \"0 6 * * MON\"")
	}
	if *retryMin <= 0 || *retryMax < *retryMin {
		return usagef("--retry-min %s, --retry-max %s: want 0 < min <= max", *retryMin, *retryMax)
	}
	ss, err := parseSchedule(st, env)
	if err != nil {
		return err
	}
	loc, runEnv := ss.zone, ss.runEnv
	log := newLogger(env, ss.level)
	sched, err := cron.ParseStandard(*spec)
	if err != nil {
		return usagef("--cron %q: %v", *spec, err)
	}
	health := &scheduleHealth{}
	ctx, sm, stopMetrics, err := startScheduleMetrics(ctx, ss.metricsAddr, health, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	s := newScheduler(env, runEnv, runArgs, log, health, sm, func(t time.Time) time.Time { return sched.Next(t.In(loc)) })
	s.retryMin, s.retryMax = *retryMin, *retryMax
	c := cron.New(cron.WithLocation(loc), cron.WithChain(cron.SkipIfStillRunning(cronLogger{log})))
	var mu sync.Mutex // belt and braces with SkipIfStillRunning: never two runs at once
	c.Schedule(sched, cron.FuncJob(func() {
		if !mu.TryLock() {
			log.Warn("previous run still going; tick skipped")
			return
		}
		defer mu.Unlock()
		s.tick(ctx)
	}))
	c.Start()
	log.Info("schedule started", "cron", *spec, "next", sched.Next(env.now().In(loc)))
	<-ctx.Done()
	log.Info("stopping schedule: waiting for a run under way")
	<-c.Stop().Done()
	return nil
}

// cronLogger adapts slog to cron's logger interface.
type cronLogger struct{ log *slog.Logger }

func (l cronLogger) Info(msg string, kv ...any) { l.log.Info("cron: "+msg, kv...) }
func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error("cron: "+msg, append(kv, "err", err)...)
}

// scheduleSettings are the settings of "digest schedule", parsed.
type scheduleSettings struct {
	zone        *time.Location // of the cron schedule and its weeks
	level       slog.Level
	metricsAddr string
	runEnv      *Env // the environment of its runs
}

// parseSchedule reads schedule's settings. The settings given to schedule
// as flags (--tz, --log-level, ...) hold for its runs too, as if they were
// in the environment; the run flags after -- win over them.
func parseSchedule(st *settings, env *Env) (scheduleSettings, error) {
	ss := scheduleSettings{runEnv: withFlagSettings(env, st), level: st.logLevel(), metricsAddr: st.get("DIGEST_METRICS_ADDR")}
	var err error
	ss.zone, err = st.location()
	return ss, err
}

// withFlagSettings returns env with the settings set by flags on fs
// overriding the environment's variables of the same name.
func withFlagSettings(env *Env, st *settings) *Env {
	set := map[string]string{}
	for _, name := range commandSettings[st.command] {
		if v := st.get(name); st.byFlag(name) {
			set[name] = v
		}
	}
	out := *env
	out.Getenv = func(k string) string {
		if v, ok := set[k]; ok {
			return v
		}
		return env.Getenv(k)
	}
	return &out
}

// The default backoff of a week's retries: 5 minutes, then 10, 20, 40,
// then every hour until the next tick. A relay or ledger outage of minutes
// costs one short wait; a long one costs a run an hour, each of which
// looks up or retries only what is left.
const (
	defaultRetryMin = 5 * time.Minute
	defaultRetryMax = time.Hour
)

// scheduler runs the due week at each tick and retries it while its run
// exits 1 or 3, until it completes or the next tick is due. Its clock,
// sleep and run are fields so that a test drives it without waiting.
type scheduler struct {
	log                *slog.Logger
	now                func() time.Time
	sleep              func(context.Context, time.Duration) error
	next               func(time.Time) time.Time // the cron's next tick after a time
	retryMin, retryMax time.Duration
	jitter             func(time.Duration) time.Duration
	health             *scheduleHealth
	metrics            *metrics.Schedule
	// run runs "digest run" with the schedule's run flags and extra ones,
	// and returns its exit code, the week it ran (zero if it stopped
	// before knowing) and the reason of a non-zero exit.
	run func(ctx context.Context, extra ...string) (code int, week digest.ISOWeek, reason string)
}

// newScheduler returns a scheduler whose runs are "digest run" with
// runArgs in runEnv, on env's clock, with the default backoff.
func newScheduler(env, runEnv *Env, runArgs []string, log *slog.Logger, health *scheduleHealth, sm *metrics.Schedule, next func(time.Time) time.Time) *scheduler {
	return &scheduler{
		log: log, now: env.now, sleep: run.Sleep, next: next,
		retryMin: defaultRetryMin, retryMax: defaultRetryMax, jitter: jitter,
		health: health, metrics: sm,
		run: func(ctx context.Context, extra ...string) (int, digest.ISOWeek, string) {
			ctx, got := withScheduledRun(ctx)
			err := cmdRun(ctx, runEnv, append(slices.Clone(runArgs), extra...))
			return exitCode(env, "run", err), got.week, reasonOf(err)
		},
	}
}

// tick runs the due week, then retries it with backoff while it is
// incomplete (exit 3) or failed (exit 1) and the next tick is not due.
func (s *scheduler) tick(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	start := s.now()
	nextTick := s.next(start)
	s.log.Info("scheduled run starting")
	code, week, reason := s.run(ctx)
	for attempt := 1; ; attempt++ {
		if code != ExitFailure && code != ExitIncomplete {
			s.settled(week, code, reason)
			return
		}
		if ctx.Err() != nil {
			s.log.Warn("scheduled run stopped; the schedule is stopping", "week", week.String(), "exit_code", code, "reason", reason)
			return
		}
		wait := s.jitter(s.backoff(attempt))
		at := s.now().Add(wait)
		if !at.Before(nextTick) {
			s.log.Error("scheduled run: giving up on the week, the next tick is due; backfill it: digest run --week "+week.String(),
				"week", week.String(), "exit_code", code, "reason", reason, "retries", attempt-1, "next_tick", nextTick)
			s.health.set(fmt.Sprintf("behind: %s is incomplete (exit %d: %s); retries stopped at the next tick", week, code, reason))
			s.metrics.SetBehind(true)
			return
		}
		s.health.set(fmt.Sprintf("behind: %s is incomplete (exit %d: %s); retry %d at %s", week, code, reason, attempt, at.UTC().Format(time.RFC3339)))
		s.metrics.SetBehind(true)
		lvl := slog.LevelWarn // 3: incomplete
		if code == ExitFailure {
			lvl = slog.LevelError
		}
		s.log.Log(ctx, lvl, "scheduled run left the week incomplete; retrying it", "week", week.String(), "exit_code", code, "reason", reason,
			"retry", attempt, "retry_in", wait.Round(time.Second), "retry_at", at)
		if err := s.sleep(ctx, wait); err != nil {
			return
		}
		s.metrics.Retried()
		var extra []string
		if !week.IsZero() {
			extra = []string{"--week", week.String()} // the same week, whatever the clock says now
		}
		var again digest.ISOWeek
		code, again, reason = s.run(ctx, extra...)
		if week.IsZero() {
			week = again
		}
	}
}

// backoff is the wait before retry n (from 1): retryMin doubled n-1
// times, at most retryMax.
func (s *scheduler) backoff(n int) time.Duration {
	d := s.retryMin
	for i := 1; i < n && d < s.retryMax; i++ {
		d *= 2
	}
	return min(d, s.retryMax)
}

// settled records a run that needs no retry: the week is no longer
// behind (exit 4 needs a person, not a retry: its alert and "digest
// status" say so).
func (s *scheduler) settled(week digest.ISOWeek, code int, reason string) {
	s.health.set("")
	s.metrics.SetBehind(false)
	if code == ExitOK {
		s.log.Info("scheduled run finished", "week", week.String(), "exit_code", code)
		return
	}
	lvl := slog.LevelWarn
	if code == ExitUsage {
		lvl = slog.LevelError
	}
	s.log.Log(context.Background(), lvl, "scheduled run finished; not retried, it needs a person", "week", week.String(), "exit_code", code, "reason", reason)
}

// jitter returns d minus up to 20% of it, at random: runs retried by many
// schedules after one outage do not come back together.
func jitter(d time.Duration) time.Duration {
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

// scheduleHealth is what /healthz says: ok, or why the schedule is behind.
// A nil *scheduleHealth is always ok.
type scheduleHealth struct {
	mu     sync.Mutex
	reason string
}

func (h *scheduleHealth) set(reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reason = reason
}

// behind returns why the schedule is behind, or "".
func (h *scheduleHealth) behind() string {
	if h == nil {
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reason
}

// scheduledRun is how a run started by the schedule tells it the week it
// ran (noteScheduledWeek).
type scheduledRun struct{ week digest.ISOWeek }

type scheduledRunKey struct{}

func withScheduledRun(ctx context.Context) (context.Context, *scheduledRun) {
	r := &scheduledRun{}
	return context.WithValue(ctx, scheduledRunKey{}, r), r
}

// noteScheduledWeek tells the schedule that started this run (if any) the
// week it runs.
func noteScheduledWeek(ctx context.Context, w digest.ISOWeek) {
	if r, ok := ctx.Value(scheduledRunKey{}).(*scheduledRun); ok {
		r.week = w
	}
}

// reasonOf is the reason of a command's error, for the schedule's log.
func reasonOf(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
