package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// The fenced statements, in sql/fence.sql; each *One form is its *Many
// form for one element, with scalar arguments.
//
// startManySQL marks claims' sends as started, one row per fence: $1 keys,
// $2 tokens, $3 now, $4 the history text. Only the current token of a row
// still in state claimed matches; an expired lease nobody took over still
// holds the row. It returns the 1-based positions of the fences that
// matched.
//
// Plans: r.key = ANY($1) gives the planner a primary-key probe per key; the
// state is compared with a column of f, not a constant, so that no plan
// reads every receipt in state 'claimed' through an index on state (stale
// statistics estimated a handful and thousands were read, dead entries
// included). The unnest is materialized once: as the inner side of a nested
// loop it was evaluated again for every receipt.
//
// renewSQL extends the leases of claims still held: $1 keys, $2 tokens,
// $3 the new expiry, $4 now. The same fence as startManySQL, so a claim
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
// finishManySQL ends claims, one row per Finish: $1 keys, $2 tokens, $3 new
// states, $4 provider refs, $5 next attempts, $6 maybe sent (retryable),
// $7 reasons, $8 run ids, $9 history details, $10 now. The same fence as
// startManySQL; it returns the positions that matched.
//
// observeSQL records one observation and reads, from the statement's
// snapshot (which excludes the new row), the previous observation and the
// governing receipt. $1 candidate keys, $2 fingerprint, $3 run id, $4 week,
// $5 now.
var (
	startManySQL  = queries.Get("StartMany")
	startOneSQL   = queries.Get("StartOne")
	renewSQL      = queries.Get("RenewMany")
	finishManySQL = queries.Get("FinishMany")
	finishOneSQL  = queries.Get("FinishOne")
	observeSQL    = queries.Get("Observe")
)

// StartSending marks each fence's send as started, in one round trip.
func (s *Store) StartSending(ctx context.Context, fences []digest.Fence) (_ []error, err error) {
	defer classify(&err)
	now := s.nowUTC()
	return s.fenced(ctx, "start sending", len(fences),
		func(i int) digest.Key { return fences[i].Key }, fenceStatement(fences, startManySQL, startOneSQL, now, ledger.HistorySendStarted))
}

// fenceStatement is the statement callback of fenced for a statement over
// fences ($1 keys, $2 tokens) followed by more arguments.
func fenceStatement(fences []digest.Fence, many, one string, more ...any) func(round []int) (string, []any) {
	return func(round []int) (string, []any) {
		keys, tokens := make([]string, len(round)), make([]int64, len(round))
		for j, i := range round {
			keys[j], tokens[j] = string(fences[i].Key), fences[i].Token
		}
		if len(round) == 1 {
			return one, append([]any{keys[0], tokens[0]}, more...)
		}
		return many, append([]any{keys, tokens}, more...)
	}
}

// Renew extends each fence's lease to lease from now, in one round trip.
func (s *Store) Renew(ctx context.Context, fences []digest.Fence, lease time.Duration) (_ time.Time, _ []error, err error) {
	defer classify(&err)
	if lease <= 0 {
		return time.Time{}, nil, fmt.Errorf("%w: renew: lease must be positive", ledger.ErrInvalid)
	}
	now := s.nowUTC()
	expires := now.Add(lease)
	keys, tokens := make([]string, len(fences)), make([]int64, len(fences))
	for i, f := range fences {
		keys[i], tokens[i] = string(f.Key), f.Token
	}
	errs := make([]error, len(fences))
	build := func() *pgx.Batch {
		b := &pgx.Batch{}
		b.Queue(renewSQL, keys, tokens, expires, now)
		return b
	}
	read := func(br pgx.BatchResults) error {
		for i := range errs {
			errs[i] = digest.ErrStaleClaim
		}
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("renew: %w", err)
		}
		var idx int
		var renewed bool
		_, err = pgx.ForEachRow(rows, []any{&idx, &renewed}, func() error {
			errs[idx-1] = nil
			if !renewed {
				errs[idx-1] = digest.ErrNotRenewed
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("renew: %w", err)
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
	if err := ledger.ValidateFinishes(fs); err != nil {
		return nil, err
	}
	now := s.nowUTC()
	return s.fenced(ctx, "finish", len(fs),
		func(i int) digest.Key { return fs[i].Key },
		func(round []int) (string, []any) {
			n := len(round)
			keys, tokens, states, refs := make([]string, n), make([]int64, n), make([]string, n), make([]string, n)
			nexts, maybes := make([]*time.Time, n), make([]bool, n)
			reasons, runs, details := make([]string, n), make([]string, n), make([]string, n)
			for j, i := range round {
				f := fs[i]
				keys[j], tokens[j], states[j], refs[j] = string(f.Key), f.Token, string(f.State), f.ProviderRef
				if f.State == digest.StateRetryable {
					next := ledger.NextAttempt(f, now).UTC()
					nexts[j] = &next
				}
				maybes[j], reasons[j], runs[j], details[j] = f.MaybeSent, f.Reason, f.RunID, ledger.FinishDetail(f)
			}
			if n == 1 {
				return finishOneSQL, []any{keys[0], tokens[0], states[0], refs[0], nexts[0], maybes[0], reasons[0], runs[0], details[0], now}
			}
			return finishManySQL, []any{keys, tokens, states, refs, nexts, maybes, reasons, runs, details, now}
		})
}

// fenced runs fenced multi-row updates, one statement per round, in one
// round trip; an element whose position is not returned lost its claim.
func (s *Store) fenced(ctx context.Context, what string, n int, keyOf func(i int) digest.Key, stmt func(round []int) (string, []any)) ([]error, error) {
	stmts := rounds(n, func(i int) []digest.Key { return []digest.Key{keyOf(i)} })
	errs := make([]error, n)
	build := func() *pgx.Batch {
		b := &pgx.Batch{}
		for _, round := range stmts {
			sql, args := stmt(round)
			b.Queue(sql, args...)
		}
		return b
	}
	read := func(br pgx.BatchResults) error {
		for i := range errs {
			errs[i] = digest.ErrStaleClaim
		}
		for _, round := range stmts {
			rows, err := br.Query()
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			matched, err := pgx.CollectRows(rows, pgx.RowTo[int])
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			for _, idx := range matched {
				errs[round[idx-1]] = nil
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
	if err := ledger.ValidateObservations(obs); err != nil {
		return nil, err
	}
	now := s.nowUTC()
	out := make([]digest.Observed, len(obs))
	build := func() *pgx.Batch {
		b := &pgx.Batch{}
		for _, o := range obs {
			b.Queue(observeSQL, ledger.KeyStrings(o.Keys), o.Fingerprint, o.RunID, o.Week.String(), now)
		}
		return b
	}
	read := func(br pgx.BatchResults) error {
		for i, o := range obs {
			var (
				prev, lease, next *time.Time
				key, state, fp    *string
			)
			if err := br.QueryRow().Scan(&prev, &key, &state, &fp, &lease, &next); err != nil {
				return fmt.Errorf("observe %s: %w", o.Keys[0], err)
			}
			var c *ledger.Stored
			if key != nil {
				c = &ledger.Stored{Key: digest.Key(*key), State: digest.State(*state), Fingerprint: *fp,
					LeaseExpires: timeOrZero(lease), NextAttempt: timeOrZero(next)}
			}
			out[i] = digest.Observed{Would: ledger.ObservedOutcome(c, o.Fingerprint, now), PreviousAt: timeOrZero(prev)}
		}
		return nil
	}
	if err := s.sendBatch(ctx, customPlans, build, read); err != nil {
		return nil, err
	}
	return out, nil
}
