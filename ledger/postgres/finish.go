package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// startSQL marks claims' sends as started, one row per fence: $1 keys,
// $2 tokens, $3 now. Only the current token of a row still in state
// claimed matches; an expired lease nobody took over still holds the row.
// It returns the 1-based positions of the fences that matched.
//
// Plans: r.key = ANY($1) gives the planner a primary-key probe per key; the
// state is compared with a column of f, not a constant, so that no plan
// reads every receipt in state 'claimed' through an index on state (stale
// statistics estimated a handful and thousands were read, dead entries
// included). The unnest is materialized once: as the inner side of a nested
// loop it was evaluated again for every receipt.
const startSQL = `
WITH f AS MATERIALIZED (
    SELECT f.*, 'claimed'::text AS claimed FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS f(key, token, idx)
), s AS (
    UPDATE receipts r SET send_started = true, send_started_at = $3::timestamptz, updated_at = $3::timestamptz
    FROM f
    WHERE r.key = ANY($1::text[]) AND r.key = f.key AND r.claim_token = f.token AND r.state = f.claimed
    RETURNING f.idx, r.key, r.run_id
), event AS (
    INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
    SELECT key, $3::timestamptz, 'claimed', 'claimed', run_id, 'send started' FROM s
)
SELECT idx FROM s`

// startOneSQL is startSQL for one fence, with scalar arguments.
var startOneSQL = fenceOne(startSQL)

// renewSQL extends the leases of claims still held: $1 keys, $2 tokens,
// $3 the new expiry, $4 now. The same fence as startSQL, so a claim another
// run took over is not renewed; an expired lease nobody took over is.
//
// It locks with SKIP LOCKED and so never waits: the run's own StartSending
// and Finish update overlapping rows at the same time, in no set order,
// and a renewal that waited for them could deadlock with them. A row it
// skips is returned as not renewed; a fenced row not returned lost its
// claim. No history row: a renewal is not a transition, and a slow week
// renews each claim many times. lease_expires_at is in no index, so this
// is a HOT update like the mark.
const renewSQL = `
WITH f AS MATERIALIZED (
    SELECT f.*, 'claimed'::text AS claimed FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS f(key, token, idx)
), l AS MATERIALIZED (
    SELECT r.key FROM receipts r WHERE r.key = ANY($1::text[]) FOR UPDATE SKIP LOCKED
), u AS (
    UPDATE receipts r SET lease_expires_at = $3::timestamptz, updated_at = $4::timestamptz
    FROM f
    WHERE r.key = ANY($1::text[]) AND r.key = f.key AND r.claim_token = f.token AND r.state = f.claimed
        AND r.key IN (SELECT key FROM l)
    RETURNING f.idx
)
SELECT idx, true FROM u
UNION ALL
SELECT f.idx, false FROM f WHERE f.key NOT IN (SELECT key FROM l)`

// fenceOne turns a statement over the fences $1 keys, $2 tokens (startSQL,
// renewSQL) into its form for one fence, with scalar arguments.
func fenceOne(sql string) string {
	return mustReplace(mustReplace(sql, `WITH f AS MATERIALIZED (
    SELECT f.*, 'claimed'::text AS claimed FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS f(key, token, idx)
)`, `WITH f AS (
    SELECT $1::text AS key, $2::bigint AS token, 1::bigint AS idx, 'claimed'::text AS claimed
)`), `r.key = ANY($1::text[]) AND `, ``)
}

// finishSQL ends claims, one row per Finish: $1 keys, $2 tokens, $3 new
// states, $4 provider refs, $5 next attempts, $6 maybe sent (retryable),
// $7 reasons, $8 run ids, $9 history details, $10 now. The same fence as
// startSQL; it returns the positions that matched.
const finishSQL = `
WITH f AS MATERIALIZED (
    SELECT f.*, 'claimed'::text AS claimed FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::timestamptz[], $6::boolean[],
            $7::text[], $8::text[], $9::text[]) WITH ORDINALITY
        AS f(key, token, state, ref, next, maybe, reason, run_id, detail, idx)
), u AS (
    UPDATE receipts r SET
        previous_state = r.state,
        state = f.state,
        lease_expires_at = NULL,
        sent_at = CASE WHEN f.state = 'sent' THEN $10::timestamptz ELSE r.sent_at END,
        provider_ref = CASE WHEN f.state = 'sent' THEN f.ref ELSE r.provider_ref END,
        next_attempt_at = CASE WHEN f.state = 'retryable' THEN f.next END,
        maybe_sent = CASE WHEN f.state = 'retryable' THEN f.maybe ELSE r.maybe_sent OR r.send_started END,
        last_error = CASE WHEN f.state = 'sent' THEN r.last_error ELSE f.reason END,
        run_id = f.run_id,
        updated_at = $10::timestamptz
    FROM f
    WHERE r.key = ANY($1::text[]) AND r.key = f.key AND r.claim_token = f.token AND r.state = f.claimed
    RETURNING f.idx, r.key, r.previous_state, r.state, f.run_id, f.detail
), event AS (
    INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
    SELECT key, $10::timestamptz, previous_state, state, run_id, detail FROM u
)
SELECT idx FROM u`

// finishOneSQL is finishSQL for one Finish, with scalar arguments.
var finishOneSQL = mustReplace(mustReplace(finishSQL,
	`WITH f AS MATERIALIZED (
    SELECT f.*, 'claimed'::text AS claimed FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::timestamptz[], $6::boolean[],
            $7::text[], $8::text[], $9::text[]) WITH ORDINALITY
        AS f(key, token, state, ref, next, maybe, reason, run_id, detail, idx)
)`,
	`WITH f AS (
    SELECT $1::text AS key, $2::bigint AS token, $3::text AS state, $4::text AS ref, $5::timestamptz AS next,
        $6::boolean AS maybe, $7::text AS reason, $8::text AS run_id, $9::text AS detail, 1::bigint AS idx,
        'claimed'::text AS claimed
)`), `r.key = ANY($1::text[]) AND `, ``)

// StartSending marks each fence's send as started, in one round trip.
func (s *Store) StartSending(ctx context.Context, fences []digest.Fence) ([]error, error) {
	now := s.nowUTC()
	return s.fenced(ctx, "start sending", len(fences),
		func(i int) digest.Key { return fences[i].Key }, fenceStatement(fences, startSQL, startOneSQL, now))
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
func (s *Store) Renew(ctx context.Context, fences []digest.Fence, lease time.Duration) (time.Time, []error, error) {
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
	if err := s.sendBatch(ctx, build, read); err != nil {
		return time.Time{}, nil, err
	}
	return expires, errs, nil
}

// Finish records each outcome, in one round trip.
func (s *Store) Finish(ctx context.Context, fs []digest.Finish) ([]error, error) {
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
			return finishSQL, []any{keys, tokens, states, refs, nexts, maybes, reasons, runs, details, now}
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
	if err := s.sendBatchMode(ctx, n == 1, build, read); err != nil {
		return nil, err
	}
	return errs, nil
}

// observeSQL records one observation and reads, from the statement's
// snapshot (which excludes the new row), the previous observation and the
// governing receipt. $1 candidate keys, $2 fingerprint, $3 run id, $4 week,
// $5 now.
const observeSQL = `
WITH prev AS (
    SELECT max(o.at) AS at FROM unnest($1::text[]) AS c(k)
    CROSS JOIN LATERAL (SELECT max(at) AS at FROM observations WHERE key = c.k OFFSET 0) o
), ins AS (
    INSERT INTO observations (key, fingerprint, run_id, iso_week, at)
    VALUES (($1::text[])[1], $2::text, $3::text, $4::text, $5::timestamptz)
)
SELECT prev.at, r.key, r.state, r.fingerprint, r.lease_expires_at, r.next_attempt_at
FROM prev LEFT JOIN LATERAL (
    SELECT x.* FROM unnest($1::text[]) WITH ORDINALITY AS c(k, n)
    CROSS JOIN LATERAL (SELECT * FROM receipts WHERE key = c.k OFFSET 0) x
    ORDER BY c.n LIMIT 1
) r ON true`

// Observe records observations and reports what a claim would decide, in
// one round trip. No receipt changes.
func (s *Store) Observe(ctx context.Context, obs []digest.Observation) ([]digest.Observed, error) {
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
	if err := s.sendBatch(ctx, build, read); err != nil {
		return nil, err
	}
	return out, nil
}
