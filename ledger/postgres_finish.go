package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/digest"
)

// startSQL marks a claim's send as started: $1 key, $2 token, $3 now.
// Only the current token of a row still in state claimed matches; an
// expired lease nobody took over still holds the row.
const startSQL = `
WITH s AS (
    UPDATE receipts r SET send_started = true, send_started_at = $3::timestamptz, updated_at = $3::timestamptz
    WHERE r.key = $1::text AND r.claim_token = $2::bigint AND r.state = 'claimed'
    RETURNING r.key, r.run_id
), event AS (
    INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
    SELECT key, $3::timestamptz, 'claimed', 'claimed', run_id, 'send started' FROM s
)
SELECT count(*) FROM s`

// finishSQL ends a claim: $1 key, $2 token, $3 new state, $4 provider ref,
// $5 next attempt, $6 maybe sent (retryable), $7 now, $8 reason, $9 run id,
// $10 history detail. The same fence as startSQL.
const finishSQL = `
WITH f AS (
    UPDATE receipts r SET
        previous_state = r.state,
        state = $3::text,
        lease_expires_at = NULL,
        sent_at = CASE WHEN $3::text = 'sent' THEN $7::timestamptz ELSE r.sent_at END,
        provider_ref = CASE WHEN $3::text = 'sent' THEN $4::text ELSE r.provider_ref END,
        next_attempt_at = CASE WHEN $3::text = 'retryable' THEN $5::timestamptz END,
        maybe_sent = CASE WHEN $3::text = 'retryable' THEN $6::boolean ELSE r.maybe_sent OR r.send_started END,
        last_error = CASE WHEN $3::text = 'sent' THEN r.last_error ELSE $8::text END,
        run_id = $9::text,
        updated_at = $7::timestamptz
    WHERE r.key = $1::text AND r.claim_token = $2::bigint AND r.state = 'claimed'
    RETURNING r.key, r.previous_state, r.state
), event AS (
    INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
    SELECT key, $7::timestamptz, previous_state, state, $9::text, $10::text FROM f
)
SELECT count(*) FROM f`

// StartSending marks each fence's send as started, in one round trip.
func (s *Postgres) StartSending(ctx context.Context, fences []digest.Fence) ([]error, error) {
	now := s.nowUTC()
	return s.fenced(ctx, "start sending", len(fences), func(i int) (digest.Key, string, []any) {
		f := fences[i]
		return f.Key, startSQL, []any{string(f.Key), f.Token, now}
	})
}

// Finish records each outcome, in one round trip.
func (s *Postgres) Finish(ctx context.Context, fs []digest.Finish) ([]error, error) {
	if err := validateFinishes(fs); err != nil {
		return nil, err
	}
	now := s.nowUTC()
	return s.fenced(ctx, "finish", len(fs), func(i int) (digest.Key, string, []any) {
		f := fs[i]
		return f.Key, finishSQL, []any{string(f.Key), f.Token, string(f.State), f.ProviderRef,
			nextAttempt(f, now).UTC(), f.MaybeSent, now, f.Reason, f.RunID, finishDetail(f)}
	})
}

// fenced sends n fenced updates (statements returning how many rows they
// changed) in one batch; an element that changed nothing lost its claim.
func (s *Postgres) fenced(ctx context.Context, what string, n int, stmt func(i int) (digest.Key, string, []any)) ([]error, error) {
	errs := make([]error, n)
	build := func() *pgx.Batch {
		b := &pgx.Batch{}
		for i := range n {
			_, sql, args := stmt(i)
			b.Queue(sql, args...)
		}
		return b
	}
	read := func(br pgx.BatchResults) error {
		for i := range n {
			var changed int
			if err := br.QueryRow().Scan(&changed); err != nil {
				key, _, _ := stmt(i)
				return fmt.Errorf("%s %s: %w", what, key, err)
			}
			errs[i] = staleIf(changed == 0)
		}
		return nil
	}
	if err := s.sendBatch(ctx, build, read); err != nil {
		return nil, err
	}
	return errs, nil
}

func staleIf(stale bool) error {
	if stale {
		return digest.ErrStaleClaim
	}
	return nil
}

// observeSQL records one observation and reads, from the statement's
// snapshot (which excludes the new row), the previous observation and the
// governing receipt. $1 candidate keys, $2 fingerprint, $3 run id, $4 week,
// $5 now.
const observeSQL = `
WITH prev AS (
    SELECT max(at) AS at FROM observations WHERE key = ANY($1::text[])
), ins AS (
    INSERT INTO observations (key, fingerprint, run_id, iso_week, at)
    VALUES (($1::text[])[1], $2::text, $3::text, $4::text, $5::timestamptz)
)
SELECT prev.at, r.key, r.state, r.fingerprint, r.lease_expires_at, r.next_attempt_at
FROM prev LEFT JOIN LATERAL (
    SELECT * FROM receipts WHERE key = ANY($1::text[])
    ORDER BY array_position($1::text[], key) LIMIT 1
) r ON true`

// Observe records observations and reports what a claim would decide, in
// one round trip. No receipt changes.
func (s *Postgres) Observe(ctx context.Context, obs []digest.Observation) ([]digest.Observed, error) {
	if err := validateObservations(obs); err != nil {
		return nil, err
	}
	now := s.nowUTC()
	out := make([]digest.Observed, len(obs))
	build := func() *pgx.Batch {
		b := &pgx.Batch{}
		for _, o := range obs {
			b.Queue(observeSQL, keyStrings(o.Keys), o.Fingerprint, o.RunID, o.Week.String(), now)
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
			var c *current
			if key != nil {
				c = &current{key: digest.Key(*key), state: digest.State(*state), fingerprint: *fp,
					leaseExpires: timeOrZero(lease), nextAttempt: timeOrZero(next)}
			}
			out[i] = digest.Observed{Would: would(c, o.Fingerprint, now), PreviousAt: timeOrZero(prev)}
		}
		return nil
	}
	if err := s.sendBatch(ctx, build, read); err != nil {
		return nil, err
	}
	return out, nil
}
