package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/digest"
)

// claimSQL decides one ClaimRequest in one statement.
//
// $1 candidate keys (current first), $2 fingerprint, $3 ISO week, $4 run id,
// $5 now, $6 lease expiry.
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
// The final SELECT returns the claimed or quarantined row (changed = true),
// or else the row as of the statement's snapshot (changed = false), or no
// row when the receipt was inserted concurrently after that snapshot.
const claimSQL = `
WITH target AS (
    -- The first candidate holding a receipt governs (an older key id after
    -- a rotation); with none, a new receipt goes under the current key.
    SELECT coalesce(
        (SELECT r.key FROM receipts r WHERE r.key = ANY($1::text[])
          ORDER BY array_position($1::text[], r.key) LIMIT 1),
        ($1::text[])[1]) AS key
),
claim AS (
    INSERT INTO receipts AS r (key, key_id, state, fingerprint, attempts, claim_token,
        lease_expires_at, first_claimed_at, last_attempt_at, run_id, iso_week, updated_at)
    SELECT t.key, split_part(t.key, ':', 1), 'claimed', $2::text, 1, nextval('receipt_claim_token'),
        $6::timestamptz, $5::timestamptz, $5::timestamptz, $4::text, $3::text, $5::timestamptz
    FROM target t
    ON CONFLICT (key) DO UPDATE SET
        previous_state = r.state,
        state = CASE WHEN r.fingerprint <> excluded.fingerprint THEN 'quarantined' ELSE 'claimed' END,
        conflict_fingerprint = CASE WHEN r.fingerprint <> excluded.fingerprint
            THEN excluded.fingerprint ELSE r.conflict_fingerprint END,
        attempts = CASE WHEN r.fingerprint <> excluded.fingerprint THEN r.attempts ELSE r.attempts + 1 END,
        claim_token = CASE WHEN r.fingerprint <> excluded.fingerprint THEN r.claim_token ELSE excluded.claim_token END,
        lease_expires_at = CASE WHEN r.fingerprint <> excluded.fingerprint THEN NULL ELSE excluded.lease_expires_at END,
        send_started = CASE WHEN r.fingerprint <> excluded.fingerprint THEN r.send_started ELSE false END,
        send_started_at = CASE WHEN r.fingerprint <> excluded.fingerprint THEN r.send_started_at END,
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
        r.lease_expires_at, r.next_attempt_at, r.sent_at, r.provider_ref, r.maybe_sent
),
event AS (
    INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
    SELECT c.key, $5::timestamptz, c.previous_state, c.state, $4::text,
        CASE WHEN c.state = 'quarantined' THEN 'fingerprint differs from the stored one'
             WHEN c.previous_state IS NULL THEN 'claimed'
             WHEN c.previous_state = 'claimed' THEN 'lease expired; taken over'
             ELSE 'claimed again' END
        || CASE WHEN c.state = 'claimed' AND c.maybe_sent THEN '; an earlier send may have reached the provider' ELSE '' END
    FROM claim c
)
SELECT true, c.key, c.state, c.fingerprint, c.attempts, c.claim_token,
    c.lease_expires_at, c.next_attempt_at, c.sent_at, c.provider_ref, c.maybe_sent
FROM claim c
UNION ALL
SELECT false, r.key, r.state, r.fingerprint, r.attempts, r.claim_token,
    r.lease_expires_at, r.next_attempt_at, r.sent_at, r.provider_ref, r.maybe_sent
FROM receipts r JOIN target t ON r.key = t.key
WHERE NOT EXISTS (SELECT 1 FROM claim)`

// readSQL reads the governing receipt among candidate keys $1.
const readSQL = `
SELECT false, r.key, r.state, r.fingerprint, r.attempts, r.claim_token,
    r.lease_expires_at, r.next_attempt_at, r.sent_at, r.provider_ref, r.maybe_sent
FROM receipts r WHERE r.key = ANY($1::text[])
ORDER BY array_position($1::text[], r.key) LIMIT 1`

// scanCurrent scans the columns claimSQL and readSQL return.
func scanCurrent(row pgx.Row) (c *current, changed bool, err error) {
	var (
		state, key          string
		lease, next, sentAt *time.Time
		ref                 *string
	)
	c = &current{}
	err = row.Scan(&changed, &key, &state, &c.fingerprint, &c.attempts, &c.token,
		&lease, &next, &sentAt, &ref, &c.maybeSent)
	if err != nil {
		return nil, false, err
	}
	c.key, c.state = digest.Key(key), digest.State(state)
	c.leaseExpires, c.nextAttempt, c.sentAt = timeOrZero(lease), timeOrZero(next), timeOrZero(sentAt)
	c.providerRef = stringOrEmpty(ref)
	return c, changed, nil
}

// Claim decides each request with one statement; all of them go in one
// round trip and one implicit transaction. Statements are sent in key order
// so that two overlapping batches lock rows in the same order.
func (s *Postgres) Claim(ctx context.Context, reqs []digest.ClaimRequest) ([]digest.ClaimResult, error) {
	if err := validateClaims(reqs); err != nil {
		return nil, err
	}
	now := s.nowUTC()
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(reqs[a].Keys[0], reqs[b].Keys[0])
	})
	res := make([]digest.ClaimResult, len(reqs))
	var missing []int // receipts inserted by others after our snapshot
	build := func() *pgx.Batch {
		b := &pgx.Batch{}
		for _, i := range order {
			r := reqs[i]
			b.Queue(claimSQL, keyStrings(r.Keys), r.Fingerprint, r.Week.String(), r.RunID,
				now, now.Add(r.Lease))
		}
		return b
	}
	read := func(br pgx.BatchResults) error {
		missing = missing[:0]
		for _, i := range order {
			c, changed, err := scanCurrent(br.QueryRow())
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				missing = append(missing, i)
			case err != nil:
				return fmt.Errorf("claim %s: %w", reqs[i].Keys[0], err)
			case changed && c.state == digest.StateClaimed:
				res[i] = claimed(c)
			default:
				res[i] = report(c, reqs[i].Fingerprint, now)
			}
		}
		return nil
	}
	if err := s.sendBatch(ctx, build, read); err != nil {
		return nil, err
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
func (s *Postgres) readMissing(ctx context.Context, reqs []digest.ClaimRequest, missing []int, res []digest.ClaimResult, now time.Time) error {
	b := &pgx.Batch{}
	for _, i := range missing {
		b.Queue(readSQL, keyStrings(reqs[i].Keys))
	}
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	for _, i := range missing {
		c, _, err := scanCurrent(br.QueryRow())
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			// Gone again (pruned in between): report busy; the next run decides.
			res[i] = digest.ClaimResult{Outcome: digest.OutcomeBusy, Key: reqs[i].Keys[0]}
		case err != nil:
			return fmt.Errorf("claim %s: read: %w", reqs[i].Keys[0], err)
		default:
			res[i] = report(c, reqs[i].Fingerprint, now)
		}
	}
	return br.Close()
}
