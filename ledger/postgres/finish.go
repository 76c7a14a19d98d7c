package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/internal/rules"
)

// The fenced statements, in sql/fence.sql, one for each decision: they take
// their arguments by name, arrays of one element per fence, a single fence
// as a set of one.
//
// startSQL marks claims' sends as started, one row per fence: keys,
// tokens, the clock (Store.clockArg), the history text. Only the current
// token of a row still in state claimed matches; an expired lease nobody
// took over still holds the row. It returns the 1-based positions of the
// fences that matched.
//
// Plans: r.key = ANY(@keys) gives the planner a primary-key probe per key; the
// state is compared with a column of f, not a constant, so that no plan
// reads every receipt in state 'claimed' through an index on state (stale
// statistics estimated a handful and thousands were read, dead entries
// included). The unnest is materialized once: as the inner side of a nested
// loop it was evaluated again for every receipt.
//
// renewSQL extends the leases of claims still held: keys, tokens, the
// lease in microseconds, added to the server's now(), the clock. The same
// fence as startSQL, so a claim
// another run took over is not renewed; an expired lease nobody took over
// is.
//
// It locks with SKIP LOCKED and so never waits: the run's own StartSending
// and Finish update overlapping rows at the same time, in no set order,
// and a renewal that waited for them could deadlock with them. A row it
// skips is returned as not renewed; a fenced row not returned lost its
// claim. No history row: a renewal is not a transition, and a slow week
// renews each claim many times. lease_expires_at is in no index, so this
// is a HOT update like the mark.
//
// finishSQL ends claims, one row per Finish: keys, tokens, new states,
// provider refs, next attempts, maybe sent (retryable), reasons, run ids,
// history details, address keys, the clock. A next attempt travels as its
// delay (ledger.CallTimes.Delay), added to the server's now(). The same
// fence as startSQL; it returns the positions that matched.
//
// observeSQL records one observation and reads, from the statement's
// snapshot (which excludes the new row), the previous observation and the
// governing receipt. $1 candidate keys, $2 fingerprint, $3 run id, $4 week,
// $5 the clock; it returns the server's time last.
var (
	startSQL = queries.Get("Start")
	// startFreshSQL is startSQL for receipts without an earlier start.
	startFreshSQL = queries.Get("StartFresh")
	renewSQL      = queries.Get("Renew")
	finishSQL     = queries.Get("Finish")
	observeSQL    = queries.Get("Observe")
	endClaimSQL   = queries.Get("EndClaim")
	// weekPartitionSQL says whether a week's partition exists (startFor).
	weekPartitionSQL = queries.Get("WeekPartition")
	// receiptWeeksSQL reads the weeks of the keys $1 (see fenceWeeks).
	receiptWeeksSQL = queries.Get("ReceiptWeeks")
)

// StartSending marks each fence's send as started: one round trip when
// no fence's receipt had an earlier start (startFreshSQL), a second for
// those that had one, or lost their claim (startSQL, which records the
// earlier start's history row and tells a lost claim). A single fence goes
// to startSQL at once: it is the run's mark of a claim whose earlier send
// a look-up did not find (run's deliver), which always has an earlier
// start, or a chunk of one at a rate of a few messages a second.
func (s *Store) StartSending(ctx context.Context, fences []digest.Fence) (_ []error, err error) {
	defer classify(&err)
	weeks, err := s.fenceWeeks(ctx, len(fences), func(i int) (digest.Key, digest.ISOWeek) { return fences[i].Key, fences[i].Week })
	if err != nil {
		return nil, fmt.Errorf("start sending: %w", err)
	}
	if len(fences) == 1 {
		return s.startSending(ctx, fences, weeks, false)
	}
	errs, err := s.startSending(ctx, fences, weeks, true)
	if err != nil {
		return nil, err
	}
	var again []int // fences the fresh start did not match
	for i, e := range errs {
		if e != nil {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return errs, nil
	}
	rest, restWeeks := make([]digest.Fence, len(again)), make([]string, len(again))
	for j, i := range again {
		rest[j], restWeeks[j] = fences[i], weeks[i]
	}
	restErrs, err := s.startSending(ctx, rest, restWeeks, false)
	if err != nil {
		return nil, err
	}
	for j, i := range again {
		errs[i] = restErrs[j]
	}
	return errs, nil
}

// startSending runs the fresh start (fresh) or the full one over fences,
// one statement per week, each aimed at its week's partition when it can
// be (startFor).
func (s *Store) startSending(ctx context.Context, fences []digest.Fence, weeks []string, fresh bool) ([]error, error) {
	clock := s.clockArg()
	for range 2 {
		stmts := map[string]string{}
		for _, w := range weeks {
			if _, ok := stmts[w]; !ok {
				sql, err := s.startFor(ctx, w, fresh)
				if err != nil {
					return nil, fmt.Errorf("start sending: %w", err)
				}
				stmts[w] = sql
			}
		}
		errs, err := s.fenced(ctx, "start sending", len(fences), func(i int) digest.Key { return fences[i].Key }, weeks,
			func(st weekRound) (string, pgx.StrictNamedArgs) {
				keys, tokens := make([]string, len(st.idx)), make([]int64, len(st.idx))
				for j, i := range st.idx {
					keys[j], tokens[j] = string(fences[i].Key), fences[i].Token
				}
				args := pgx.StrictNamedArgs{"keys": keys, "tokens": tokens, "clock": clock, "week": st.week}
				if !fresh {
					args["replaced"] = ledger.HistorySendStarted
				}
				return stmts[st.week], args
			})
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != sqlstateUndefinedTable {
			return errs, err
		}
		// A week's partition was dropped since startFor found it (a
		// prune): the batch changed nothing; again through receipts.
		for w := range stmts {
			s.leaves.Delete(w)
		}
	}
	return nil, fmt.Errorf("start sending: a week's partition was dropped twice while marking")
}

// weekStarts are the start statements of one week (startFor).
type weekStarts struct{ fresh, full string }

// startFor is the start statement for week w's fences, the fresh one
// (startFreshSQL) or the full one (startSQL): aimed at the week's
// partition when it has one, else at receipts, found once per week and
// kept. Aimed at the partition, the statement is planned without
// receipts' other partitions (custom plans of the partitioned table cost
// 0.3 ms a call, a quarter of the mark's cost), and receipts' statement
// triggers do not fire: they count receipts by week and state, which a
// start does not change. A week without a partition (its receipts in the
// DEFAULT partition), or one the role may not update directly (a partition
// made before the role was granted receipts: see docs/security.md), keeps
// the statements on receipts, which are right for every week; the
// partition of a week that has one holds every receipt of the week, since
// PostgreSQL keeps the DEFAULT partition's rows out of it.
func (s *Store) startFor(ctx context.Context, w string, fresh bool) (string, error) {
	pick := func(ws weekStarts) string {
		if fresh {
			return ws.fresh
		}
		return ws.full
	}
	if v, ok := s.leaves.Load(w); ok {
		return pick(v.(weekStarts)), nil
	}
	ws := weekStarts{fresh: startFreshSQL, full: startSQL}
	if week, err := digest.ParseISOWeek(w); err == nil { // no week: the statements match nothing
		name := weekPartition(week)
		var isPartition bool
		if err := s.pool.QueryRow(ctx, weekPartitionSQL, name).Scan(&isPartition); err != nil {
			return "", err
		}
		if isPartition {
			ident := pgx.Identifier{name}.Sanitize()
			r := strings.NewReplacer("UPDATE receipts r", "UPDATE "+ident+" r", "JOIN receipts o", "JOIN "+ident+" o")
			ws = weekStarts{fresh: r.Replace(startFreshSQL), full: r.Replace(startSQL)}
		}
	}
	s.leaves.Store(w, ws)
	return pick(ws), nil
}

// fenceWeeks returns the week of each of n fenced elements (keyWeek gives
// its key and week): its own, or, for one that carries none (an operator's
// or a test's fence), its receipt's, read in one query. A key with no
// receipt gets no week and so matches nothing, as it would with one.
func (s *Store) fenceWeeks(ctx context.Context, n int, keyWeek func(i int) (digest.Key, digest.ISOWeek)) ([]string, error) {
	weeks := make([]string, n)
	var unknown []string
	for i := range n {
		k, w := keyWeek(i)
		if w.IsZero() {
			unknown = append(unknown, string(k))
			continue
		}
		weeks[i] = w.String()
	}
	if len(unknown) == 0 {
		return weeks, nil
	}
	rows, err := s.pool.Query(ctx, receiptWeeksSQL, unknown)
	if err != nil {
		return nil, err
	}
	found := map[string]string{}
	var key, week string
	if _, err := pgx.ForEachRow(rows, []any{&key, &week}, func() error {
		found[key] = week
		return nil
	}); err != nil {
		return nil, err
	}
	for i := range n {
		if k, w := keyWeek(i); w.IsZero() {
			weeks[i] = found[string(k)]
		}
	}
	return weeks, nil
}

// Renew extends each fence's lease to lease from the server's now(), in
// one round trip. The expiry it returns is on the caller's clock: lease
// from the caller's time before the call, so never later than the
// server's.
func (s *Store) Renew(ctx context.Context, fences []digest.Fence, lease time.Duration) (_ time.Time, _ []error, err error) {
	defer classify(&err)
	if lease <= 0 {
		return time.Time{}, nil, fmt.Errorf("%w: renew: lease must be positive", ledger.ErrInvalid)
	}
	clock := s.clockArg()
	expires := s.nowUTC().Add(lease)
	weeks, err := s.fenceWeeks(ctx, len(fences), func(i int) (digest.Key, digest.ISOWeek) { return fences[i].Key, fences[i].Week })
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("renew: %w", err)
	}
	// One statement per week, all its fences (a renewal never needed
	// rounds: it sets the same expiry on every row it matches).
	stmts := weekRounds(len(fences), func(i int) string { return weeks[i] }, func(int) []digest.Key { return nil })
	errs := make([]error, len(fences))
	build := func() *pgx.Batch {
		b := &pgx.Batch{}
		for _, st := range stmts {
			keys, tokens := make([]string, len(st.idx)), make([]int64, len(st.idx))
			for j, i := range st.idx {
				keys[j], tokens[j] = string(fences[i].Key), fences[i].Token
			}
			b.Queue(renewSQL, pgx.StrictNamedArgs{"keys": keys, "tokens": tokens, "lease": rules.Micros(lease),
				"clock": clock, "week": st.week})
		}
		return b
	}
	read := func(br pgx.BatchResults) error {
		for i := range errs {
			errs[i] = digest.ErrStaleClaim
		}
		for _, st := range stmts {
			rows, err := br.Query()
			if err != nil {
				return fmt.Errorf("renew: %w", err)
			}
			var idx int
			var renewed bool
			_, err = pgx.ForEachRow(rows, []any{&idx, &renewed}, func() error {
				i := st.idx[idx-1]
				errs[i] = nil
				if !renewed {
					errs[i] = digest.ErrNotRenewed
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("renew: %w", err)
			}
		}
		return nil
	}
	if err := s.sendBatch(ctx, customPlans, build, read); err != nil {
		return time.Time{}, nil, err
	}
	return expires, errs, nil
}

// Finish records each outcome, in one round trip.
func (s *Store) Finish(ctx context.Context, fs []digest.Finish) (_ []error, err error) {
	defer classify(&err)
	if err := rules.ValidateFinishes(fs); err != nil {
		return nil, err
	}
	times, clock := ledger.CallTimes{Caller: s.nowUTC()}, s.clockArg()
	weeks, err := s.fenceWeeks(ctx, len(fs), func(i int) (digest.Key, digest.ISOWeek) { return fs[i].Key, fs[i].Week })
	if err != nil {
		return nil, fmt.Errorf("finish: %w", err)
	}
	return s.fenced(ctx, "finish", len(fs), func(i int) digest.Key { return fs[i].Key }, weeks,
		func(st weekRound) (string, pgx.StrictNamedArgs) {
			round := st.idx
			n := len(round)
			keys, tokens, states, refs := make([]string, n), make([]int64, n), make([]string, n), make([]string, n)
			nexts, maybes := make([]*int64, n), make([]bool, n)
			reasons, runs, details, addrs := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			for j, i := range round {
				f := fs[i]
				keys[j], tokens[j], states[j], refs[j] = string(f.Key), f.Token, string(f.State), f.ProviderRef
				if f.State == digest.StateRetryable {
					next := rules.Micros(times.Delay(f))
					nexts[j] = &next
				}
				maybes[j], reasons[j], runs[j], details[j], addrs[j] = f.MaybeSent, f.Reason, f.RunID, ledger.FinishDetail(f), f.AddressKey
			}
			return finishSQL, pgx.StrictNamedArgs{"keys": keys, "tokens": tokens, "states": states, "refs": refs,
				"nexts": nexts, "maybes": maybes, "reasons": reasons, "run_ids": runs, "details": details,
				"address_keys": addrs, "clock": clock, "week": st.week}
		})
}

// fenced runs fenced multi-row updates, one statement per round of one
// week (weeks[i] is element i's), in one round trip; an element whose
// position is not returned lost its claim.
func (s *Store) fenced(ctx context.Context, what string, n int, keyOf func(i int) digest.Key, weeks []string, stmt func(weekRound) (string, pgx.StrictNamedArgs)) ([]error, error) {
	stmts := weekRounds(n, func(i int) string { return weeks[i] }, func(i int) []digest.Key { return []digest.Key{keyOf(i)} })
	errs := make([]error, n)
	build := func() *pgx.Batch {
		b := &pgx.Batch{}
		for _, st := range stmts {
			sql, args := stmt(st)
			b.Queue(sql, args)
		}
		return b
	}
	read := func(br pgx.BatchResults) error {
		for i := range errs {
			errs[i] = digest.ErrStaleClaim
		}
		for _, st := range stmts {
			rows, err := br.Query()
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			matched, err := pgx.CollectRows(rows, pgx.RowTo[int])
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			for _, idx := range matched {
				errs[st.idx[idx-1]] = nil
			}
		}
		return nil
	}
	if err := s.sendBatch(ctx, plansFor(n), build, read); err != nil {
		return nil, err
	}
	return errs, nil
}

// Observe records observations and reports what a claim would decide, in
// one round trip. No receipt changes.
func (s *Store) Observe(ctx context.Context, obs []digest.Observation) (_ []digest.Observed, err error) {
	defer classify(&err)
	if err := rules.ValidateObservations(obs); err != nil {
		return nil, err
	}
	clock := s.clockArg()
	out := make([]digest.Observed, len(obs))
	build := func() *pgx.Batch {
		b := &pgx.Batch{}
		for _, o := range obs {
			b.Queue(observeSQL, rules.KeyStrings(o.Keys), o.Fingerprint, o.RunID, o.Week.String(), clock)
		}
		return b
	}
	read := func(br pgx.BatchResults) error {
		for i, o := range obs {
			var (
				prev, lease, next, sent *time.Time
				key, state, fp          *string
				at                      time.Time
			)
			if err := br.QueryRow().Scan(&prev, &key, &state, &fp, &lease, &next, &sent, &at); err != nil {
				return fmt.Errorf("observe %s: %w", o.Keys[0], err)
			}
			var c *rules.Stored
			if key != nil {
				c = &rules.Stored{Key: digest.Key(*key), State: digest.State(*state), Fingerprint: *fp,
					LeaseExpires: timeOrZero(lease), NextAttempt: timeOrZero(next), SentAt: timeOrZero(sent)}
			}
			out[i] = digest.Observed{Would: rules.ObservedOutcome(c, o.Fingerprint, at), PreviousAt: timeOrZero(prev)}
		}
		return nil
	}
	if err := s.sendBatch(ctx, customPlans, build, read); err != nil {
		return nil, err
	}
	return out, nil
}

// EndClaims ends the claims no run is finishing (digest.ClaimEnder), in
// one statement.
func (s *Store) EndClaims(ctx context.Context, ends []digest.EndClaim) (_ []digest.EndedClaim, err error) {
	defer classify(&err)
	return s.endClaims(ctx, s.pool, ends, nil)
}

// EndStaleClaims ends a prune's stale claims (ledger.StaleClaimEnder):
// EndClaims under week_runs' SHARE lock, as the prune's deletion takes it,
// so a StartWeek waits for the commit, and one committed before is seen by
// the statement, which skips the weeks a run started since cutoff.
func (s *Store) EndStaleClaims(ctx context.Context, cutoff time.Time, ends []digest.EndClaim) (_ []digest.EndedClaim, err error) {
	defer classify(&err)
	var ended []digest.EndedClaim
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockWeekRunsSQL); err != nil {
			return fmt.Errorf("end stale claims: %w", err)
		}
		ended, err = s.endClaims(ctx, tx, ends, cutoff.UTC().Truncate(time.Microsecond))
		return err
	})
	if err != nil {
		return nil, err
	}
	return ended, nil
}

// endClaims runs EndClaim on q, one statement per week; cutoff, when not
// nil, is a prune's.
func (s *Store) endClaims(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, ends []digest.EndClaim, cutoff any) ([]digest.EndedClaim, error) {
	if len(ends) == 0 {
		return nil, nil
	}
	// One statement per week, in the order the weeks first appear (a
	// run's ends are all of its week; a prune's page may hold several).
	type weekEnds struct{ keys, reasons, runs []string }
	var order []string
	byWeek := map[string]*weekEnds{}
	for _, e := range ends {
		w := e.Week.String()
		we := byWeek[w]
		if we == nil {
			we = &weekEnds{}
			byWeek[w] = we
			order = append(order, w)
		}
		for _, k := range e.Keys {
			we.keys, we.reasons, we.runs = append(we.keys, string(k)), append(we.reasons, e.Reason), append(we.runs, e.RunID)
		}
	}
	var ended []digest.EndedClaim
	for _, w := range order {
		we := byWeek[w]
		rows, err := q.Query(ctx, endClaimSQL, s.clockArg(), we.keys, we.reasons, we.runs, w, cutoff)
		if err != nil {
			return nil, fmt.Errorf("end claims: %w", err)
		}
		var key, from, to string
		_, err = pgx.ForEachRow(rows, []any{&key, &from, &to}, func() error {
			ended = append(ended, digest.EndedClaim{Key: digest.Key(key), From: digest.State(from), To: digest.State(to)})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("end claims: %w", err)
		}
	}
	return ended, nil
}
