package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/metrics"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/weekstatus"
)

// pushWeekState pushes ws as the week's state (metrics.PushWeekState) when
// DIGEST_PUSHGATEWAY_URL is set. A failure is logged; it never changes the
// command's exit code.
func pushWeekState(ctx context.Context, env *Env, url string, log *slog.Logger, ws *weekstatus.Report) {
	if url == "" || ws.Shard != "all" {
		return // a shard's status is not the week's
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pushTimeout)
	defer cancel()
	if err := metrics.PushWeekState(ctx, url, nil, weekStateOf(ws, env.now())); err != nil {
		log.Error("metrics: week state push failed", "week", ws.Week, "err", err)
	}
}

// weekStateOf is ws as the week-state metric carries it.
func weekStateOf(ws *weekstatus.Report, at time.Time) metrics.WeekState {
	customers := map[string]int64{}
	for o, n := range ws.Customers {
		customers[string(o)] = n
	}
	return metrics.WeekState{Week: ws.Week, End: ws.WeekEnd, Complete: ws.Verdict == verdictComplete,
		NeedsReview: ws.NeedsReview, Customers: customers, At: at}
}

// pushWeekOf computes the week's whole status (every shard) and pushes it,
// when DIGEST_PUSHGATEWAY_URL is set: after every run of the week, so
// that the week's state is current whatever the run's exit code said.
//
// "digest schedule" serves its metrics instead of pushing: its runs put
// the week's state among the metrics it serves (labelled by week), so
// that the alerts on digest_week_* see its weeks as they see pushed ones.
func pushWeekOf(ctx context.Context, env *Env, url string, log *slog.Logger, store ledger.Store, source digest.Source, q weekstatus.Query) {
	reg, scheduled := ctx.Value(scheduleMetricsKey{}).(*metrics.Registry)
	if !scheduled && url == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*pushTimeout)
	defer cancel()
	q.Shard, q.Now = digest.Shard{}, env.now()
	ws, _, _, err := weekstatus.Compute(ctx, store, source, q)
	if err != nil {
		log.Error("metrics: week state not pushed: the week's status failed", "week", q.Spec.Week.String(), "err", err)
		return
	}
	if scheduled {
		reg.ObserveWeekState(weekStateOf(ws, env.now()))
		return
	}
	pushWeekState(ctx, env, url, log, ws)
}

// pushReviewedWeek pushes the state of week w after a review command
// changed its receipts. The state needs the source (every customer is
// counted): with DIGEST_DATABASE_URL, the PostgreSQL relations. Without
// one (an embedded ledger and a snapshot file) nothing is pushed, rather
// than a state that could not say whether the week is complete; the log
// says to run "digest status --snapshot FILE" with
// DIGEST_PUSHGATEWAY_URL instead.
func pushReviewedWeek(ctx context.Context, env *Env, wp weekPush, store *ledgerDB, w digest.ISOWeek) {
	if wp.url == "" {
		return
	}
	log := newLogger(env, wp.level)
	if wp.ledger.DatabaseURL == "" {
		log.Warn("metrics: week state not pushed: no source to count the week's customers; push it with: digest status --week "+w.String()+" --snapshot FILE", "week", w.String())
		return
	}
	fail := func(err error) { log.Error("metrics: week state not pushed", "week", w.String(), "err", err) }
	if wp.err != nil {
		fail(wp.err)
		return
	}
	keys, err := loadKeyring(wp.keys, wp.ledger, log)
	if err != nil {
		fail(err)
		return
	}
	source, closeSource, err := openSource(ctx, wp.ledger, "", store, log)
	if err != nil {
		fail(err)
		return
	}
	defer closeSource()
	spec := digest.Spec{Week: w, Location: wp.zone, Type: wp.typ, Version: wp.version}
	pushWeekOf(ctx, env, wp.url, log, store, source, weekstatus.Query{Spec: spec, Settle: wp.settle, Keys: keys})
}

// weekPush is what a command that changes receipts needs to push their
// week's state afterwards (pushReviewedWeek).
type weekPush struct {
	url          string // DIGEST_PUSHGATEWAY_URL; "": no push
	level        slog.Level
	ledger       ledgerConfig
	keys         keyConfig
	zone         *time.Location
	settle       time.Duration
	typ, version string
	err          error // DIGEST_TZ or DIGEST_SETTLE unparsable: the push fails (logged), not the command
}

// weekPush reads the settings of pushReviewedWeek. They are read only when
// a push is due (DIGEST_PUSHGATEWAY_URL and a PostgreSQL source), and a
// zone or settle that does not parse fails the push, not the command.
func (s *settings) weekPush() weekPush {
	wp := weekPush{url: s.get("DIGEST_PUSHGATEWAY_URL"), level: s.logLevel(), ledger: s.ledger()}
	if wp.url == "" || wp.ledger.DatabaseURL == "" {
		return wp
	}
	if wp.zone, wp.err = s.location(); wp.err != nil {
		return wp
	}
	if wp.settle, wp.err = s.duration("DIGEST_SETTLE"); wp.err != nil {
		return wp
	}
	wp.keys, wp.typ, wp.version = s.hmacKeys(), s.get("DIGEST_TYPE"), s.get("DIGEST_VERSION")
	return wp
}

// pushReviewedKey pushes the state of the week of key's receipt; see
// pushReviewedWeek.
func pushReviewedKey(ctx context.Context, env *Env, wp weekPush, store *ledgerDB, key digest.Key) {
	if wp.url == "" {
		return
	}
	r, _, err := store.Show(ctx, key)
	if err != nil {
		newLogger(env, wp.level).Error("metrics: week state not pushed", "key", string(key), "err", err)
		return
	}
	if w, err := digest.ParseISOWeek(r.Week); err == nil {
		pushReviewedWeek(ctx, env, wp, store, w)
	}
}

// expectationTimeout bounds the recording of a run's expectation in all:
// its look-ups have pushTimeout each, and the record what is left
// (weekstatus.RecordExpectation). The record read the week's receipts
// partition before migration 00016 (3.7 s at 9,000,785 receipts, more
// with every shard recording at once); it reads the week's counters now,
// and the bound stays for a database that is slow for another reason. A
// database that does not answer fails the first look-up instead.
const expectationTimeout = 5 * time.Minute

// recordExpectation records what the run read of its shard for status
// (weekstatus.RecordExpectation). A failure is logged: the run's result
// stands, and status reads the source.
func recordExpectation(ctx context.Context, env *Env, log *slog.Logger, store ledger.Store, rd *weekstatus.Reader, keys *digest.Keyring, cfg *run.Config) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), expectationTimeout)
	defer cancel()
	if err := weekstatus.RecordExpectation(ctx, store, rd, keys, cfg.Spec, cfg.SendEmpty, cfg.RunID, env.now(), pushTimeout); err != nil {
		log.Warn("record the run's expectation for status (status will read the source)", "err", err)
	}
}
