package main

import (
	"context"
	"flag"
	"log/slog"
	"slices"
	"sync"

	"github.com/robfig/cron/v3"
)

const scheduleHelp = `Usage: digest schedule --cron "SPEC" [-- RUN FLAGS...]

Runs "digest run" on a cron schedule, for hosts without a Kubernetes
CronJob. SPEC has five fields (minute hour day-of-month month day-of-week)
and may start with CRON_TZ=Area/City; without it DIGEST_TZ applies. A run
never starts while the previous one is still going (that tick is skipped and
logged). SIGTERM stops the schedule: a run under way stops claiming and
finishes its sends within its grace period. Everything after -- goes to
each run unchanged; settings given to schedule itself (--tz, --type,
--content-version, --log-level) hold for its runs too.

Examples:
  digest schedule --cron "0 6 * * MON"
  digest schedule --cron "CRON_TZ=Europe/Berlin 0 6 * * MON" -- --deadline 45m --grace 30s
  digest schedule --cron "0 6 * * MON" --tz Europe/Berlin -- --snapshot /data/week.jsonl
`

func cmdSchedule(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "schedule", scheduleHelp)
	st := register(fs, env, gDigest, gLog, gServe)
	spec := fs.String("cron", "", "cron schedule, e.g. \"0 6 * * MON\" (required)")
	pos, runArgs, err := parseRest(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: flags for each run go after --", pos[0])
	}
	// The settings given to schedule as flags (--tz, --log-level, ...)
	// hold for its runs too, as if they were in the environment; the run
	// flags after -- win over them.
	runEnv := withFlagSettings(env, fs)
	if *spec == "" {
		return usagef("--cron is required, e.g. --cron \"0 6 * * MON\"")
	}
	loc, err := st.location()
	if err != nil {
		return err
	}
	log := newLogger(env, st)
	sched, err := cron.ParseStandard(*spec)
	if err != nil {
		return usagef("--cron %q: %v", *spec, err)
	}
	ctx, stopMetrics, err := startScheduleMetrics(ctx, st, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	c := cron.New(cron.WithLocation(loc), cron.WithChain(cron.SkipIfStillRunning(cronLogger{log})))
	var mu sync.Mutex // belt and braces with SkipIfStillRunning: never two runs at once
	c.Schedule(sched, cron.FuncJob(func() {
		if !mu.TryLock() {
			log.Warn("previous run still going; tick skipped")
			return
		}
		defer mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		log.Info("scheduled run starting")
		code := exitCode(env, "run", cmdRun(ctx, runEnv, slices.Clone(runArgs)))
		log.Info("scheduled run finished", "exit_code", code)
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

// withFlagSettings returns env with the settings set by flags on fs
// overriding the environment's variables of the same name.
func withFlagSettings(env *Env, fs *flag.FlagSet) *Env {
	set := map[string]string{}
	fs.Visit(func(f *flag.Flag) {
		for _, st := range settingsTable {
			if st.flag == f.Name {
				set[st.env] = f.Value.String()
			}
		}
	})
	out := *env
	out.Getenv = func(k string) string {
		if v, ok := set[k]; ok {
			return v
		}
		return env.Getenv(k)
	}
	return &out
}
