package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/trace"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/redact"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/sender/smtp"
	"github.com/weeklydigest/digest/snapshot"
	"github.com/weeklydigest/digest/weekstatus"
)

const runHelp = `Usage: digest run [--week YYYY-Www] [--mode enforce|observe] [--snapshot FILE.jsonl]
                  [--shard I/N] [--cohort PCT] [--ambiguous hold|resend] [--deadline DURATION]

Sends one week's digests: for each customer of the snapshot, builds the
digest, claims its key in the ledger (one winner, however many runs), sends
it, and records the outcome. A digest already sent is never sent again; a
send that may have reached the provider before it was recorded is looked up
at the provider first (DIGEST_LOOKUP_URL; the file outbox looks itself up),
or held for review.

This is the CronJob's command. The week defaults to the ISO week before now
in DIGEST_TZ (what a Monday-morning run sends); a backfill is the same
command with --week. Customers come from --snapshot FILE.jsonl, or else from
the PostgreSQL relations digest_customers and digest_activity, read as of
the week's cutoff: its end in DIGEST_TZ plus DIGEST_SETTLE (default 4h, for
activity recorded after it occurred), pinned by the week's first run that
may send and the same for every later run. A run that may send refuses a
week before its cutoff (exit 2, naming the week's end) unless
--early-cutoff says the early cutoff is intended: then as_of is now and the
pin is marked partial ("digest status" says so; "digest repin" moves it to
the cutoff later). --mode observe never pins: it reads the pin, or else the
cutoff (now, if earlier).

A run refuses (exit 2, before claiming anything) what would change the
meaning of the week's keys: a DIGEST_TZ other than the one the week's first
run pinned, or a keyring without a key id the week's receipts are stored
under. It refuses a source with no customers at all unless --allow-empty,
and a PostgreSQL ledger without DIGEST_SMTP_URL unless DIGEST_OUTBOX_DIR (or
--outbox-dir) names the outbox on purpose.

Examples:
  digest run --snapshot examples/snapshot.jsonl --week 2026-W48   # embedded: SQLite + ./outbox
  digest run                                                      # last week, PostgreSQL + SMTP
  digest run --week 2026-W40                                      # backfill a week
  digest run --mode observe --week 2026-W48                       # dry run: sends nothing
  digest run --cohort 10                                          # enforce for 10%, observe the rest
  digest run --week 2026-W49 --early-cutoff                       # before the week's end: a partial cutoff
  digest run --shard 2/8                                          # one pod of eight
  JOB_COMPLETION_INDEX=2 digest run --shard /8                    # Kubernetes Indexed Job

A week already sent (or in flight) under another DIGEST_VERSION of its
DIGEST_TYPE is refused (exit 2, nothing pinned or claimed), naming each
version and how many it sent: a content version is a new digest, and the
run would send every customer the week again. Only
--resend-as-new-version --reason TEXT [--by NAME] sends it; who, why and
the other versions' counts are kept on the week's pin of this version,
and later runs of that version go on without the flag. --mode observe
warns instead. "digest status" and "digest verify" then count the
customers who got the week under more than one version.

A week whose receipts "digest prune" deleted is refused (exit 2, nothing
claimed): without its receipts the run cannot tell what was sent. Only
--resend-pruned-week runs it, and then every digest whose receipt was
pruned is sent a second time.

Exit codes: 0 all sent or settled, 1 failure, 2 usage (or a pruned week,
a week sent under another version, or a week before its cutoff without
--early-cutoff),
3 incomplete (retry later), 4 rows need review ("digest review list").

Diagnostics: --trace FILE writes a Go execution trace of the run (go tool
trace FILE); the final "run finished" line's summary.stages says where each
pipeline stage spent the run (docs/operations.md, "Where a run waits").

Repeats: a summary with duplicates counts them by how long ago the digest
was sent (observe mode: last observed), none of them sent again:
repeat_under_5m (under five minutes: another run, or a retry of this
CronJob, sent it just now; many of them mean two runs overlap),
repeat_same_day (within 24 hours), repeat_later (within the replay
horizon, DIGEST_REPLAY_HORIZON) and repeat_beyond_horizon (older than that: a week replayed so late that
prune could have deleted its receipts).

Traces: with OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
set, the run sends OpenTelemetry spans over OTLP/HTTP: the run, each pass,
each claim batch, start chunk and finish batch (a ledger call each), and a
span per key (its HMAC hex, never an address) for a look-up or a failed
send. Log lines made under a span carry its trace_id and span_id. These are
the standard OpenTelemetry variables, not DIGEST_ settings; the SDK's own
apply too: OTEL_SDK_DISABLED=true (off), OTEL_SERVICE_NAME (default digest),
OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER, OTEL_EXPORTER_OTLP_HEADERS.
An unreachable collector never fails the run; its exit waits at most 5s to
flush the spans (docs/operations.md, "Traces").

Metrics: the final "run finished" record carries the run's metrics (its
"metrics" object: every series a Pushgateway push has, by name), so a
CronJob needs no Pushgateway to keep them. With DIGEST_PUSHGATEWAY_URL set
they are pushed; with OTEL_EXPORTER_OTLP_ENDPOINT (or
OTEL_EXPORTER_OTLP_METRICS_ENDPOINT) set they are also sent once over
OTLP/HTTP to <endpoint>/v1/metrics (OTEL_METRICS_EXPORTER=none: not).
Both together take at most 10s after the run; a failure is logged and
never changes the exit code (docs/operations.md, "Metrics and alerts").
`

func cmdRun(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "run", runHelp)
	st := register(fs, env, "run")
	st.changesLedger()
	week := fs.String("week", "", "ISO week YYYY-Www (default: the week before now in DIGEST_TZ)")
	mode := fs.String("mode", "enforce", "enforce (send) or observe (dry run: record observations, send nothing, change no receipt)")
	snap := fs.String("snapshot", "", "JSON Lines snapshot file (default: the PostgreSQL source relations)")
	shard := fs.String("shard", "", "I/N: only customers of shard I of N; /N takes I from $JOB_COMPLETION_INDEX")
	cohort := fs.Int("cohort", -1, "enforce for a stable PCT% of customers, observe the rest (0-100)")
	ambiguous := fs.String("ambiguous", "hold", "with no look-up, a maybe-sent digest is: hold (operator review) or resend")
	deadline := fs.Duration("deadline", 30*time.Minute, "retry temporary failures that come due within this long from the start; 0: no retry pass")
	grace := fs.Duration("grace", 20*time.Second, "on SIGTERM, how long sends under way may take to finish and be recorded")
	lookupDelay := fs.Duration("lookup-delay", 2*time.Minute, "after an ambiguous send, or after taking over a crashed run's claim whose send had started, wait this long before asking the provider (providers list accepted messages with a lag)")
	retryBackoff := fs.Duration("retry-backoff", 30*time.Second, "wait about this long (jittered: half of it to all of it) before retrying a temporary failure, doubling each retry up to 1h; a provider's Retry-After or a 4xx's requested time wins when later")
	lenient := fs.Bool("lenient", false, "send the valid customers of a snapshot with bad lines, reporting each skipped line (default: refuse the run)")
	sendEmpty := fs.Bool("send-empty", false, "send digests to customers with no activity in the week (default: skip them)")
	allowEmpty := fs.Bool("allow-empty", false, "run even when the source holds no customers at all (default: refuse, exit 2: the source is probably not loaded)")
	batch := fs.Int("batch-size", 100, "keys per ledger round trip")
	observeSample := fs.Int("observe-sample", 10, "observe mode: log this many would-be recipients (\"would send\", by key); 0: none")
	observeAddresses := fs.Bool("observe-addresses", false, "observe mode: add the address to each sampled line (default: keys only, no customer data in logs)")
	traceFile := fs.String("trace", "", "diagnostic: write a Go execution trace of the run (runtime/trace) to FILE, for \"go tool trace FILE\"")
	earlyCutoff := fs.Bool("early-cutoff", false, "send a week before its end plus DIGEST_SETTLE on purpose: pins now as a partial cutoff (status says so; activity recorded later is not sent). Default: refuse, exit 2")
	resendPruned := fs.Bool("resend-pruned-week", false, "run a week whose receipts were pruned (digest status lists them): its digests whose receipts went are SENT AGAIN (default: refuse, exit 2)")
	resendVersion := fs.Bool("resend-as-new-version", false, "send a week already sent under another DIGEST_VERSION of the type: EVERY CUSTOMER GETS THE WEEK AGAIN under this version (needs --reason; kept on the pin). Default: refuse, exit 2")
	reason := fs.String("reason", "", "with --resend-as-new-version: why (required; kept on the week's pin)")
	by := fs.String("by", env.Getenv("USER"), "with --resend-as-new-version: who (kept on the week's pin)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	resend, err := resendAsNewVersion(*resendVersion, *reason, *by)
	if err != nil {
		return err
	}
	rs, err := parseRun(st, env, *week, *mode, *shard, *cohort, *ambiguous)
	if err != nil {
		return err
	}
	log := newLogger(env, rs.level)
	traces, log := startTracing(ctx, env, log)
	defer traces.flush()
	cfg := rs.cfg
	cfg.Tracer = traces.Tracer()
	noteScheduledWeek(ctx, cfg.Spec.Week)
	log = log.With("run_id", cfg.RunID)
	cfg.Grace, cfg.Lenient, cfg.SendEmpty, cfg.BatchSize, cfg.Logger = *grace, *lenient, *sendEmpty, *batch, log
	cfg.ResendPrunedWeek = *resendPruned
	cfg.ResendAsNewVersion = resend
	cfg.AllowEmpty = *allowEmpty
	cfg.EarlyCutoff = *earlyCutoff
	if *earlyCutoff && cfg.Mode == run.ModeObserve {
		return usagef("--early-cutoff goes with --mode enforce (observe mode never pins)")
	}
	switch {
	case *observeSample < 0:
		return usagef("--observe-sample %d: want 0 or more", *observeSample)
	case *observeSample == 0:
		cfg.ObserveSample = -1
	default:
		cfg.ObserveSample = *observeSample
	}
	if *observeAddresses && cfg.Mode != run.ModeObserve {
		return usagef("--observe-addresses goes with --mode observe")
	}
	cfg.ObserveAddresses = *observeAddresses
	if *lookupDelay <= 0 {
		return usagef("--lookup-delay %s: want a positive duration", *lookupDelay)
	}
	cfg.LookupDelay = *lookupDelay
	if *retryBackoff <= 0 || *retryBackoff > time.Hour {
		return usagef("--retry-backoff %s: want a duration above 0 and at most 1h", *retryBackoff)
	}
	cfg.Backoff.Base = *retryBackoff
	if *deadline < 0 {
		return usagef("--deadline %s: want 0 or a positive duration", *deadline)
	}
	if *deadline > 0 {
		cfg.Deadline = env.now().Add(*deadline)
	}
	// Every mailer setting given is checked in every mode: a dry run that
	// passes says the real run's configuration is sound.
	ms, err := readMailer(env, st, cfg.Concurrency, log)
	if err != nil {
		return err
	}
	cfg.Rate = ms.rate
	if ms.smtp != nil { // the file outbox has no network to wait for
		cfg.SendWorstCase = smtp.WorstCase(ms.smtp.Timeout)
	}
	if err := cfg.Validate(); err != nil {
		return usagef("%v", err)
	}
	if *snap == "" && rs.ledger.DatabaseURL == "" {
		return usagef("no source: pass --snapshot FILE.jsonl, or set DIGEST_DATABASE_URL to read digest_customers and digest_activity")
	}
	keyring, err := loadKeyring(rs.keys, rs.ledger, log)
	if err != nil {
		return err
	}
	unsubscribeURI, err := loadUnsubscribe(rs.unsubscribe, keyring)
	if err != nil {
		return err
	}
	renderer, err := digest.NewRenderer()
	if err != nil {
		return err
	}

	store, err := openLedger(ctx, env, rs.ledger, log)
	if err != nil {
		return err
	}
	defer store.Close()
	bindLookup(ms.lookup, store)
	source, closeSource, err := openSource(ctx, rs.ledger, *snap, store, log)
	if err != nil {
		return err
	}
	defer closeSource()

	read, reader := weekstatus.NewReader(source, cfg.Spec, cfg.SendEmpty)
	r := &run.Runner{Ledger: store, Source: read, Keyring: keyring, Renderer: renderer, Config: cfg}
	r.Unsubscribe, r.Listed = unsubscribeURI, reader.Listed
	var checks []checkResult
	var checkErr error
	durable := checkDurability(ctx, store, log)
	if cfg.Mode == run.ModeEnforce {
		if durable != nil {
			return durable
		}
		m, lookup, err := openMailer(rs.ledger, ms)
		if err != nil {
			return err
		}
		defer m.Close()
		r.Mailer, r.Lookup = m, lookup
		if ms.smtp != nil {
			// A server no send could use stops the run before it claims.
			r.Config.Preflight = func(ctx context.Context) error { return smtp.CheckConnection(ctx, *ms.smtp) }
		}
	} else {
		checks, checkErr = checkMailer(ctx, rs.ledger, ms, log)
		checks = append(checks, ledgerCheck(durable))
		if checkErr == nil && durable != nil {
			checkErr = fmt.Errorf("ledger check failed: %w", durable)
		}
	}
	log.Info("run configured", "week", cfg.Spec.Week.String(), "mode", string(cfg.Mode),
		"ledger", describeLedger(rs.ledger), "mailer", ms.String())

	stopTrace, err := startTrace(*traceFile)
	if err != nil {
		return err
	}
	stopProgress := startProgress(env, r)
	sum, runErr := r.Run(ctx)
	stopProgress()
	log = traces.named(log)
	if err := stopTrace(); err != nil {
		log.Warn("writing the trace failed", "file", *traceFile, "err", err)
	}
	err = runExit(sum, runErr)
	refused := codeOf(err) == ExitUsage // before the dry run's check: that run went through
	if err == nil && checkErr != nil {
		// The dry run itself went through; the real one could not send.
		err = usagef("%v: a real run would fail", checkErr)
	}
	rm := observeRun(ctx, env, log, store, r, &cfg, sum, err)
	if !refused {
		// A refused run did nothing: its error (exit 2) is its one record,
		// not a "run finished" of zeros before it.
		report(env, log, &cfg, sum, sentInWeek(ctx, store, &cfg, log), rm, checks)
	}
	rm.publish(ctx, env, rs.pushgatewayURL, log)
	recordRunEnd(ctx, env, log, store, &cfg, sum, err)
	recordExpectation(ctx, env, log, store, reader, keyring, &cfg)
	pushWeekOf(ctx, env, rs.pushgatewayURL, log, store, source, weekstatus.Query{Spec: cfg.Spec, Settle: cfg.Settle, SendEmpty: cfg.SendEmpty, Keys: keyring})
	return err
}

// startTrace starts a Go execution trace of the run into path, a
// diagnostic of where the pipeline waits (docs/operations.md); the
// function it returns stops it and closes the file. No path: no trace.
func startTrace(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, usagef("--trace: %v", err)
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--trace: %w", err)
	}
	return func() error {
		trace.Stop()
		return f.Close()
	}, nil
}

// runSettings are the settings of a run, parsed and validated: the
// run.Config they make (its rate and send worst case are the mailer's,
// see readMailer) and what the run opens.
type runSettings struct {
	cfg            run.Config
	ledger         ledgerConfig
	keys           keyConfig
	unsubscribe    unsubscribeConfig
	pushgatewayURL string // "": no push
	level          slog.Level
}

// parseRun reads the run's settings and its flags that go with them into
// a run.Config. The mailer's settings are readMailer's.
func parseRun(st *settings, env *Env, week, mode, shard string, cohort int, ambiguous string) (runSettings, error) {
	rs := runSettings{level: st.logLevel(), ledger: st.ledger(), keys: st.hmacKeys(), unsubscribe: st.unsubscribe(), pushgatewayURL: st.get("DIGEST_PUSHGATEWAY_URL")}
	loc, err := st.location()
	if err != nil {
		return rs, err
	}
	w := digest.PreviousWeekOf(env.now(), loc)
	if week != "" {
		if w, err = digest.ParseISOWeek(week); err != nil {
			return rs, usagef("--week: %v", err)
		}
	}
	lease, err := st.duration("DIGEST_LEASE")
	if err != nil {
		return rs, err
	}
	settle, err := st.duration("DIGEST_SETTLE")
	if err != nil {
		return rs, err
	}
	conc, err := st.positiveInt("DIGEST_CONCURRENCY", 256)
	if err != nil {
		return rs, err
	}
	sh, err := parseShard(shard, env.Getenv("JOB_COMPLETION_INDEX"))
	if err != nil {
		return rs, err
	}
	rs.cfg = run.Config{
		Spec:        digest.Spec{Week: w, Location: loc, Type: st.get("DIGEST_TYPE"), Version: st.get("DIGEST_VERSION")},
		Mode:        run.Mode(mode),
		Shard:       sh,
		Ambiguous:   run.AmbiguousPolicy(ambiguous),
		Lease:       lease,
		Settle:      settle,
		Concurrency: conc,
		RunID:       newRunID(),
		Now:         env.Now, // nil: time.Now
	}
	if cohort >= 0 {
		if mode != string(run.ModeEnforce) {
			return rs, usagef("--cohort goes with --mode enforce (the rest of the customers are observed)")
		}
		rs.cfg.EnforcePercent = &cohort
	}
	if rs.cfg.ReplayHorizon, err = st.replayHorizon(); err != nil {
		return rs, err
	}
	return rs, nil
}

// parseShard reads "I/N", or "/N" with I from JOB_COMPLETION_INDEX.
func parseShard(s, jobIndex string) (digest.Shard, error) {
	if s == "" {
		return digest.Shard{}, nil
	}
	is, ns, ok := strings.Cut(s, "/")
	n, err := strconv.Atoi(ns)
	if !ok || err != nil || n < 1 || n > 10000 {
		return digest.Shard{}, usagef("--shard %q: want I/N with N from 1 to 10000, e.g. 0/4 (or /4 with JOB_COMPLETION_INDEX set)", s)
	}
	src := "--shard"
	if is == "" {
		if jobIndex == "" {
			return digest.Shard{}, usagef("--shard %q: no index before the slash and JOB_COMPLETION_INDEX is unset", s)
		}
		is, src = jobIndex, "JOB_COMPLETION_INDEX"
	}
	i, err := strconv.Atoi(is)
	if err != nil || i < 0 || i >= n {
		return digest.Shard{}, usagef("%s: index %q must be 0 to %d", src, is, n-1)
	}
	return digest.Shard{Index: i, Count: n}, nil
}

// openSource returns the JSON Lines file, or the PostgreSQL source (on the
// ledger's pool when the ledger is PostgreSQL; store may be nil).
func openSource(ctx context.Context, st ledgerConfig, path string, store *ledgerDB, log *slog.Logger) (digest.Source, func(), error) {
	if path != "" {
		f, err := snapshot.OpenFile(path)
		if err != nil {
			return nil, nil, usagef("--snapshot: %v", err)
		}
		return f, func() {}, nil
	}
	pool, closePool := store.sharedPool(), func() {}
	if pool == nil {
		var err error
		if pool, err = pgxpool.New(ctx, st.DatabaseURL); err != nil {
			return nil, nil, usagef("DIGEST_DATABASE_URL: %v", redact.Error(err, st.DatabaseURL))
		}
		closePool = pool.Close
	}
	src := snapshot.NewPostgres(pool, 0)
	src.SetLogger(log)
	return src, closePool, nil
}

// resendAsNewVersion reads --resend-as-new-version and its --reason and
// --by: nil without the flag.
func resendAsNewVersion(on bool, reason, by string) (*run.ResendAsNewVersion, error) {
	switch {
	case !on && strings.TrimSpace(reason) != "":
		return nil, usagef("--reason goes with --resend-as-new-version")
	case !on:
		return nil, nil
	case strings.TrimSpace(reason) == "":
		return nil, usagef("--resend-as-new-version needs --reason: the week's pin keeps why")
	case by == "":
		by = "operator"
	}
	return &run.ResendAsNewVersion{By: by, Reason: reason}, nil
}

// runExit maps a run's result to the documented exit codes. A failure
// outranks a review, which outranks an incomplete run: the next scheduled
// run finishes an incomplete week by itself, a review needs a person.
func runExit(sum run.Summary, err error) error {
	var pruned *run.PrunedWeekError
	var versions *run.VersionResendError
	switch {
	case errors.As(err, &pruned):
		return usagef("%v. To send them again on purpose: digest run --week %s --resend-pruned-week", err, pruned.Tombstone.Pin.Week)
	case errors.As(err, &versions):
		return usagef("%v. To send every customer the week again under %s on purpose: digest run --week %s --version %s --resend-as-new-version --reason TEXT",
			err, versions.Pin.Version, versions.Pin.Week, versions.Pin.Version)
	case err != nil && isUsage(err):
		return usagef("%v", err)
	case errors.Is(err, run.ErrMailerUnreachable):
		return &exitError{code: ExitIncomplete, err: err}
	case err != nil:
		return &exitError{code: ExitFailure, err: err}
	case sum.Invalid > 0:
		return &exitError{code: ExitFailure, err: fmt.Errorf("%d source records could not be built (see the log); rerun with --lenient to accept that", sum.Invalid)}
	case sum.NeedsReview():
		return &exitError{code: ExitReview, err: fmt.Errorf("%d held and %d quarantined receipts need review: digest review list", sum.Held, sum.Quarantined)}
	case !sum.Complete():
		why := "deadline reached"
		if sum.Interrupted {
			why = "interrupted"
		}
		return &exitError{code: ExitIncomplete, err: fmt.Errorf("incomplete (%s): %d digests pending; the next run continues", why, sum.Pending)}
	}
	return nil
}

// sentInWeek returns a function that counts the week's sent receipts in
// the ledger, for the "nothing to send" line: a run's own counters cover
// one shard, and count a digest once per pass that met it.
func sentInWeek(ctx context.Context, store ledger.Store, cfg *run.Config, log *slog.Logger) func() (int64, bool) {
	return func() (int64, bool) {
		c, err := store.Counts(context.WithoutCancel(ctx), cfg.Spec.Week)
		if err != nil {
			log.Warn("count the week's sent receipts", "err", err)
			return 0, false
		}
		return c.ByState[digest.StateSent], true
	}
}

// report logs the summary and the run's final metrics (the series its
// push carries) and, on a terminal, prints the summary as a table.
func report(env *Env, log *slog.Logger, cfg *run.Config, sum run.Summary, sent func() (int64, bool), final slog.LogValuer, checks []checkResult) {
	msg := "run finished"
	switch {
	case cfg.Mode == run.ModeObserve:
		msg = "observe run finished: nothing sent, no receipt changed"
	case sum.Sent == 0 && sum.Reconciled == 0 && sum.Duplicates > 0 && sum.Pending == 0 && !sum.NeedsReview():
		msg = fmt.Sprintf("nothing to send: all digests of %s were already sent", cfg.Spec.Week)
		if n, ok := sent(); ok {
			msg = fmt.Sprintf("nothing to send: all %d digests of %s were already sent", n, cfg.Spec.Week)
		}
	}
	attrs := []any{"week", cfg.Spec.Week.String(), "summary", sum, "metrics", final}
	for _, c := range checks {
		attrs = append(attrs, c.name+"_check", c.result)
	}
	log.Info(msg, attrs...)
	if cfg.EnforcePercent != nil && *cfg.EnforcePercent < 100 && sum.Observed > 0 {
		week := cfg.Spec.Week.String()
		log.Warn("cohort run: the customers outside the cohort were observed, not sent (the cohort's remainder); the week is not complete until they are: digest run --week "+week,
			"week", week, "cohort_percent", *cfg.EnforcePercent, "observed_not_sent", sum.Observed, "send_with", "digest run --week "+week)
	}
	if isTerminal(env.Stdout) {
		printSummary(env, cfg, sum, msg, checks...)
	}
}
