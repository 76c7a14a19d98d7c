package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// claimSQL decides a set of ClaimRequests in one statement, one row each.
// No two requests of one statement share a candidate key (see rounds).
//
// $1 candidate keys of each request joined by ',' (current first; keys
// never contain a comma), $2 fingerprints, $3 ISO weeks, $4 run ids,
// $5 lease expiries, $6 now.
//
// It relies on two PostgreSQL behaviours:
//   - INSERT … ON CONFLICT DO UPDATE takes the row lock of the conflicting
//     row and evaluates SET and WHERE against its latest committed version,
//     even one committed after this statement's snapshot. Of two concurrent
//     claims of an absent key, the second waits for the first to commit and
//     then sees its live lease, so exactly one wins.
//   - In DO UPDATE SET, r.* are the values before the update, so
//     previous_state = r.state records where the transition came from.
//
// It returns, per request (idx, 1-based), the claimed or quarantined row
// (changed = true), or else the row as of the statement's snapshot
// (changed = false), or nothing when the receipt was inserted concurrently
// after that snapshot. Rows are inserted in key order, so two statements
// lock shared keys in the same order.
const claimSQL = `
WITH target AS (
    SELECT q.idx, q.fingerprint, q.week, q.run_id, q.lease,
        -- The first candidate holding a receipt governs (an older key id
        -- after a rotation); with none, a new receipt goes under the
        -- current key.
        -- One primary-key probe per candidate (OFFSET 0 keeps it a probe:
        -- key = ANY(keys) was planned as a sequential scan per request by a
        -- generic plan made while receipts was small).
        coalesce(
            (SELECT c.k FROM unnest(q.keys) WITH ORDINALITY AS c(k, n)
               CROSS JOIN LATERAL (SELECT 1 FROM receipts x WHERE x.key = c.k OFFSET 0) x
              ORDER BY c.n LIMIT 1),
            q.keys[1]) AS key
    FROM (
        SELECT u.idx, string_to_array(u.cands, ',') AS keys, u.fingerprint, u.week, u.run_id, u.lease
        FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) WITH ORDINALITY
            AS u(cands, fingerprint, week, run_id, lease, idx)
    ) q
),
claim AS (
    INSERT INTO receipts AS r (key, key_id, state, fingerprint, attempts, claim_token,
        lease_expires_at, first_claimed_at, last_attempt_at, run_id, iso_week, updated_at)
    SELECT t.key, split_part(t.key, ':', 1), 'claimed', t.fingerprint, 1, nextval('receipt_claim_token'),
        t.lease, $6::timestamptz, $6::timestamptz, t.run_id, t.week, $6::timestamptz
    FROM target t ORDER BY t.key
    ON CONFLICT (key) DO UPDATE SET
        previous_state = r.state,
        state = CASE WHEN r.fingerprint <> excluded.fingerprint THEN 'quarantined' ELSE 'claimed' END,
        conflict_fingerprint = CASE WHEN r.fingerprint <> excluded.fingerprint
            THEN excluded.fingerprint ELSE r.conflict_fingerprint END,
        attempts = CASE WHEN r.fingerprint <> excluded.fingerprint THEN r.attempts ELSE r.attempts + 1 END,
        claim_token = CASE WHEN r.fingerprint <> excluded.fingerprint THEN r.claim_token ELSE excluded.claim_token END,
        lease_expires_at = CASE WHEN r.fingerprint <> excluded.fingerprint THEN NULL ELSE excluded.lease_expires_at END,
        send_started = CASE WHEN r.fingerprint <> excluded.fingerprint THEN r.send_started ELSE false END,
        send_started_at = r.send_started_at, -- kept on takeover: the window on-call searches the provider in
        -- A claim taken over after its send started may have reached the
        -- provider; a retryable row carries the mark its Finish left.
        maybe_sent = r.maybe_sent OR (r.state = 'claimed' AND r.send_started),
        next_attempt_at = CASE WHEN r.fingerprint <> excluded.fingerprint THEN r.next_attempt_at END,
        last_attempt_at = CASE WHEN r.fingerprint <> excluded.fingerprint
            THEN r.last_attempt_at ELSE excluded.last_attempt_at END,
        run_id = excluded.run_id,
        updated_at = excluded.updated_at
    WHERE CASE WHEN r.fingerprint <> excluded.fingerprint THEN r.state <> 'quarantined'
        ELSE (r.state = 'retryable' AND r.next_attempt_at <= excluded.updated_at)
          OR (r.state = 'claimed' AND r.lease_expires_at <= excluded.updated_at) END
    RETURNING r.key, r.state, r.previous_state, r.fingerprint, r.attempts, r.claim_token,
        r.lease_expires_at, r.next_attempt_at, r.sent_at, r.provider_ref, r.maybe_sent, r.run_id
),
event AS (
    INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
    SELECT c.Key, $6::timestamptz, c.previous_state, c.State, c.run_id,
        CASE WHEN c.State = 'quarantined' THEN 'fingerprint differs from the stored one'
             WHEN c.previous_state IS NULL THEN 'claimed'
             WHEN c.previous_state = 'claimed' THEN 'lease expired; taken over'
             ELSE 'claimed again' END
        || CASE WHEN c.State = 'claimed' AND c.maybe_sent THEN '; an earlier send may have reached the provider' ELSE '' END
    FROM claim c
)
SELECT t.idx, true, c.Key, c.State, c.Fingerprint, c.Attempts, c.claim_token,
    c.lease_expires_at, c.next_attempt_at, c.sent_at, c.provider_ref, c.maybe_sent,
    -- Taken over from an expired claim, maybe sent: its send may still be
    -- landing (see digest.ClaimResult.TakenOverAt).
    c.State = 'claimed' AND c.previous_state = 'claimed' AND c.maybe_sent
FROM target t JOIN claim c ON c.Key = t.key
UNION ALL
SELECT t.idx, false, x.key, x.state, x.fingerprint, x.attempts, x.claim_token,
    x.lease_expires_at, x.next_attempt_at, x.sent_at, x.provider_ref, x.maybe_sent, false
FROM target t
-- OFFSET 0 keeps this a per-key index probe: joined as a whole, a plan made
-- while receipts was small would hash it, reading every row each time.
CROSS JOIN LATERAL (SELECT * FROM receipts x WHERE x.key = t.key OFFSET 0) x
WHERE NOT EXISTS (SELECT 1 FROM claim c WHERE c.Key = t.key)`

// claimOneSQL is claimSQL for one request, with scalar arguments ($1 the
// candidate keys joined by ',', …): a single-row statement plans in a
// fraction of the time of the unnest, which matters when each key is its
// own round trip.
var claimOneSQL = mustReplace(claimSQL,
	`FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) WITH ORDINALITY
            AS u(cands, fingerprint, week, run_id, lease, idx)`,
	`FROM (VALUES ($1::text, $2::text, $3::text, $4::text, $5::timestamptz, 1::bigint))
            AS u(cands, fingerprint, week, run_id, lease, idx)`)

// mustReplace replaces the one occurrence of old in s, and panics at
// package initialisation if there is not exactly one.
func mustReplace(s, old, new string) string {
	if strings.Count(s, old) != 1 {
		panic("ledger: statement to derive from changed: " + old)
	}
	return strings.Replace(s, old, new, 1)
}

// readSQL reads the governing receipt among candidate keys $1.
const readSQL = `
SELECT 0, false, r.key, r.state, r.fingerprint, r.attempts, r.claim_token,
    r.lease_expires_at, r.next_attempt_at, r.sent_at, r.provider_ref, r.maybe_sent, false
FROM unnest($1::text[]) WITH ORDINALITY AS c(k, n)
CROSS JOIN LATERAL (SELECT * FROM receipts x WHERE x.key = c.k OFFSET 0) r
ORDER BY c.n LIMIT 1`

// scanCurrent scans the columns claimSQL and readSQL return.
func scanCurrent(row pgx.Row) (c *ledger.Stored, idx int, changed bool, err error) {
	var (
		state, key          string
		lease, next, sentAt *time.Time
		ref                 *string
	)
	c = &ledger.Stored{}
	err = row.Scan(&idx, &changed, &key, &state, &c.Fingerprint, &c.Attempts, &c.Token,
		&lease, &next, &sentAt, &ref, &c.MaybeSent, &c.TakenOver)
	if err != nil {
		return nil, 0, false, err
	}
	c.Key, c.State = digest.Key(key), digest.State(state)
	c.LeaseExpires, c.NextAttempt, c.SentAt = timeOrZero(lease), timeOrZero(next), timeOrZero(sentAt)
	c.ProviderRef = stringOrEmpty(ref)
	return c, idx, changed, nil
}

// Claim decides all requests in one round trip and one implicit
// transaction: one multi-row statement per round (see rounds), usually one.
func (s *Store) Claim(ctx context.Context, reqs []digest.ClaimRequest) ([]digest.ClaimResult, error) {
	if err := ledger.ValidateClaims(reqs); err != nil {
		return nil, err
	}
	now := s.nowUTC()
	res := make([]digest.ClaimResult, len(reqs))
	decided := make([]bool, len(reqs))
	stmts := rounds(len(reqs), func(i int) []digest.Key { return reqs[i].Keys })
	build := func() *pgx.Batch {
		b := &pgx.Batch{}
		for _, round := range stmts {
			cands, fps, weeks, runs, leases := make([]string, len(round)), make([]string, len(round)),
				make([]string, len(round)), make([]string, len(round)), make([]time.Time, len(round))
			for j, i := range round {
				r := reqs[i]
				cands[j] = strings.Join(ledger.KeyStrings(r.Keys), ",")
				fps[j], weeks[j], runs[j], leases[j] = r.Fingerprint, r.Week.String(), r.RunID, now.Add(r.Lease)
			}
			if len(round) == 1 {
				b.Queue(claimOneSQL, cands[0], fps[0], weeks[0], runs[0], leases[0], now)
				continue
			}
			b.Queue(claimSQL, cands, fps, weeks, runs, leases, now)
		}
		return b
	}
	read := func(br pgx.BatchResults) error {
		clear(decided)
		for _, round := range stmts {
			rows, err := br.Query()
			if err != nil {
				return fmt.Errorf("claim: %w", err)
			}
			for rows.Next() {
				c, idx, changed, err := scanCurrent(rows)
				if err != nil {
					rows.Close()
					return fmt.Errorf("claim: %w", err)
				}
				i := round[idx-1]
				decided[i] = true
				if changed && c.State == digest.StateClaimed {
					res[i] = ledger.Claimed(c, now)
				} else {
					res[i] = ledger.Unclaimed(c, reqs[i].Fingerprint, now)
				}
			}
			if err := rows.Err(); err != nil {
				return fmt.Errorf("claim: %w", err)
			}
		}
		return nil
	}
	if err := s.sendBatchMode(ctx, len(reqs) == 1, build, read); err != nil {
		return nil, err
	}
	var missing []int // receipts inserted by others after a statement's snapshot
	for i, ok := range decided {
		if !ok {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		if err := s.readMissing(ctx, reqs, missing, res, now); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// readMissing reports receipts that a concurrent transaction inserted after
// the claim statement's snapshot: the claim lost, so this is never Claimed.
func (s *Store) readMissing(ctx context.Context, reqs []digest.ClaimRequest, missing []int, res []digest.ClaimResult, now time.Time) error {
	b := &pgx.Batch{}
	for _, i := range missing {
		b.Queue(readSQL, ledger.KeyStrings(reqs[i].Keys))
	}
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	for _, i := range missing {
		c, _, _, err := scanCurrent(br.QueryRow())
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			// Gone again (pruned in between): report busy; the next run decides.
			res[i] = digest.ClaimResult{Outcome: digest.OutcomeBusy, Key: reqs[i].Keys[0]}
		case err != nil:
			return fmt.Errorf("claim %s: read: %w", reqs[i].Keys[0], err)
		default:
			res[i] = ledger.Unclaimed(c, reqs[i].Fingerprint, now)
		}
	}
	return br.Close()
}
