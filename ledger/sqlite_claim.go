package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// Claim decides every request in one BEGIN IMMEDIATE transaction. The
// write lock is taken before the first read, so reading the receipt and
// writing the decision cannot interleave with another writer.
func (s *SQLite) Claim(ctx context.Context, reqs []digest.ClaimRequest) ([]digest.ClaimResult, error) {
	if err := validateClaims(reqs); err != nil {
		return nil, err
	}
	now := s.nowUTC()
	res := make([]digest.ClaimResult, len(reqs))
	err := s.write(ctx, func(tx sqliteTx) error {
		for i, r := range reqs {
			var err error
			if res[i], err = claimOne(ctx, tx, r, now); err != nil {
				return fmt.Errorf("claim %s: %w", r.Keys[0], err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// claimOne applies the same decision as the PostgreSQL claim statement.
func claimOne(ctx context.Context, tx sqliteTx, r digest.ClaimRequest, now time.Time) (digest.ClaimResult, error) {
	c, err := readCurrent(ctx, tx, r.Keys)
	if err != nil {
		return digest.ClaimResult{}, err
	}
	switch {
	case c == nil:
		token, err := nextToken(ctx, tx)
		if err != nil {
			return digest.ClaimResult{}, err
		}
		key := r.Keys[0]
		_, err = tx.ExecContext(ctx, `INSERT INTO receipts (key, key_id, state, fingerprint, attempts, claim_token,
    lease_expires_at, first_claimed_at, last_attempt_at, run_id, iso_week, updated_at)
VALUES (?, ?, 'claimed', ?, 1, ?, ?, ?, ?, ?, ?, ?)`, string(key), key.KeyID(), r.Fingerprint, token,
			now.Add(r.Lease).UnixMicro(), now.UnixMicro(), now.UnixMicro(), r.RunID, r.Week.String(), now.UnixMicro())
		if err != nil {
			return digest.ClaimResult{}, err
		}
		c = &current{key: key, state: digest.StateClaimed, attempts: 1, token: token, leaseExpires: now.Add(r.Lease)}
		return claimed(c, now), sqliteEvent(ctx, tx, key, now, "", digest.StateClaimed, r.RunID, "claimed")

	case c.fingerprint != r.Fingerprint && c.state != digest.StateQuarantined:
		_, err := tx.ExecContext(ctx, `UPDATE receipts SET previous_state = state, state = 'quarantined',
    conflict_fingerprint = ?, lease_expires_at = NULL,
    maybe_sent = maybe_sent OR (state = 'claimed' AND send_started), run_id = ?, updated_at = ?
WHERE key = ?`, r.Fingerprint, r.RunID, now.UnixMicro(), string(c.key))
		if err != nil {
			return digest.ClaimResult{}, err
		}
		err = sqliteEvent(ctx, tx, c.key, now, c.state, digest.StateQuarantined, r.RunID, "fingerprint differs from the stored one")
		return digest.ClaimResult{Outcome: digest.OutcomeQuarantined, Key: c.key}, err

	case c.fingerprint == r.Fingerprint && c.claimable(now):
		token, err := nextToken(ctx, tx)
		if err != nil {
			return digest.ClaimResult{}, err
		}
		from := c.state
		detail := "claimed again"
		if from == digest.StateClaimed {
			detail = "lease expired; taken over"
		}
		c.maybeSent = c.maybeSent || from == digest.StateClaimed && c.sendStarted
		c.takenOver = from == digest.StateClaimed && c.maybeSent
		c.leaseExpires = now.Add(r.Lease)
		if c.maybeSent {
			detail += "; an earlier send may have reached the provider"
		}
		c.state, c.token, c.attempts = digest.StateClaimed, token, c.attempts+1
		_, err = tx.ExecContext(ctx, `UPDATE receipts SET previous_state = state, state = 'claimed',
    attempts = ?, claim_token = ?, lease_expires_at = ?, send_started = 0,
    maybe_sent = ?, next_attempt_at = NULL, last_attempt_at = ?, run_id = ?, updated_at = ?
WHERE key = ?`, c.attempts, token, now.Add(r.Lease).UnixMicro(), c.maybeSent, now.UnixMicro(), r.RunID, now.UnixMicro(), string(c.key))
		if err != nil {
			return digest.ClaimResult{}, err
		}
		return claimed(c, now), sqliteEvent(ctx, tx, c.key, now, from, digest.StateClaimed, r.RunID, detail)
	}
	return report(c, r.Fingerprint, now), nil
}

// readCurrent returns the governing receipt among keys (the first candidate
// that has one), or nil.
func readCurrent(ctx context.Context, tx sqliteTx, keys []digest.Key) (*current, error) {
	rows, err := tx.QueryContext(ctx, `SELECT key, state, fingerprint, attempts, claim_token, lease_expires_at,
    next_attempt_at, sent_at, coalesce(provider_ref, ''), maybe_sent, send_started
FROM receipts WHERE key IN (`+placeholders(len(keys))+`)`, keyArgs(keys)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var best *current
	bestAt := len(keys)
	for rows.Next() {
		var (
			c                   current
			key, state          string
			lease, next, sentAt sql.NullInt64
		)
		if err := rows.Scan(&key, &state, &c.fingerprint, &c.attempts, &c.token, &lease, &next, &sentAt,
			&c.providerRef, &c.maybeSent, &c.sendStarted); err != nil {
			return nil, err
		}
		c.key, c.state = digest.Key(key), digest.State(state)
		c.leaseExpires, c.nextAttempt, c.sentAt = fromUs(lease), fromUs(next), fromUs(sentAt)
		if at := slices.Index(keys, c.key); at < bestAt {
			best, bestAt = &c, at
		}
	}
	return best, rows.Err()
}

func nextToken(ctx context.Context, tx sqliteTx) (int64, error) {
	var token int64
	err := tx.QueryRowContext(ctx, `UPDATE ledger_counters SET value = value + 1 WHERE name = 'claim_token' RETURNING value`).Scan(&token)
	return token, err
}

func sqliteEvent(ctx context.Context, tx sqliteTx, key digest.Key, at time.Time, from, to digest.State, runID, detail string) error {
	var fromState any
	if from != "" {
		fromState = string(from)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
VALUES (?, ?, ?, ?, ?, ?)`, string(key), at.UnixMicro(), fromState, string(to), runID, detail)
	return err
}

// StartSending marks each fence's send as started, in one transaction.
func (s *SQLite) StartSending(ctx context.Context, fences []digest.Fence) ([]error, error) {
	now := s.nowUTC()
	errs := make([]error, len(fences))
	err := s.write(ctx, func(tx sqliteTx) error {
		for i, f := range fences {
			var runID string
			err := tx.QueryRowContext(ctx, `UPDATE receipts SET send_started = 1, send_started_at = ?, updated_at = ?
WHERE key = ? AND claim_token = ? AND state = 'claimed' RETURNING run_id`, now.UnixMicro(), now.UnixMicro(), string(f.Key), f.Token).Scan(&runID)
			if errors.Is(err, sql.ErrNoRows) {
				errs[i] = digest.ErrStaleClaim
				continue
			}
			if err == nil {
				err = sqliteEvent(ctx, tx, f.Key, now, digest.StateClaimed, digest.StateClaimed, runID, "send started")
			}
			if err != nil {
				return fmt.Errorf("start sending %s: %w", f.Key, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// Renew extends each fence's lease to lease from now, in one transaction.
// Like the PostgreSQL statement, it writes no history row.
func (s *SQLite) Renew(ctx context.Context, fences []digest.Fence, lease time.Duration) (time.Time, []error, error) {
	if lease <= 0 {
		return time.Time{}, nil, fmt.Errorf("%w: renew: lease must be positive", ErrInvalid)
	}
	now := s.nowUTC()
	expires := now.Add(lease)
	errs := make([]error, len(fences))
	err := s.write(ctx, func(tx sqliteTx) error {
		for i, f := range fences {
			res, err := tx.ExecContext(ctx, `UPDATE receipts SET lease_expires_at = ?, updated_at = ?
WHERE key = ? AND claim_token = ? AND state = 'claimed'`, expires.UnixMicro(), now.UnixMicro(), string(f.Key), f.Token)
			if err != nil {
				return fmt.Errorf("renew %s: %w", f.Key, err)
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				errs[i] = digest.ErrStaleClaim
			}
		}
		return nil
	})
	if err != nil {
		return time.Time{}, nil, err
	}
	return expires, errs, nil
}

// Finish records each outcome, in one transaction.
func (s *SQLite) Finish(ctx context.Context, fs []digest.Finish) ([]error, error) {
	if err := validateFinishes(fs); err != nil {
		return nil, err
	}
	now := s.nowUTC()
	errs := make([]error, len(fs))
	err := s.write(ctx, func(tx sqliteTx) error {
		for i, f := range fs {
			var next any
			if f.State == digest.StateRetryable {
				next = nextAttempt(f, now).UnixMicro()
			}
			res, err := tx.ExecContext(ctx, `UPDATE receipts SET
    previous_state = state, state = ?1, lease_expires_at = NULL,
    sent_at = CASE WHEN ?1 = 'sent' THEN ?2 ELSE sent_at END,
    provider_ref = CASE WHEN ?1 = 'sent' THEN ?3 ELSE provider_ref END,
    next_attempt_at = ?4,
    maybe_sent = CASE WHEN ?1 = 'retryable' THEN ?5 ELSE maybe_sent OR send_started END,
    last_error = CASE WHEN ?1 = 'sent' THEN last_error ELSE ?6 END,
    run_id = ?7, updated_at = ?2
WHERE key = ?8 AND claim_token = ?9 AND state = 'claimed'`,
				string(f.State), now.UnixMicro(), f.ProviderRef, next, f.MaybeSent, f.Reason, f.RunID, string(f.Key), f.Token)
			if err != nil {
				return fmt.Errorf("finish %s: %w", f.Key, err)
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				errs[i] = digest.ErrStaleClaim
				continue
			}
			if err := sqliteEvent(ctx, tx, f.Key, now, digest.StateClaimed, f.State, f.RunID, finishDetail(f)); err != nil {
				return fmt.Errorf("finish %s: %w", f.Key, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// Observe records observations and reports what a claim would decide, in
// one transaction. No receipt changes.
func (s *SQLite) Observe(ctx context.Context, obs []digest.Observation) ([]digest.Observed, error) {
	if err := validateObservations(obs); err != nil {
		return nil, err
	}
	now := s.nowUTC()
	out := make([]digest.Observed, len(obs))
	err := s.write(ctx, func(tx sqliteTx) error {
		for i, o := range obs {
			var prev sql.NullInt64
			err := tx.QueryRowContext(ctx, `SELECT max(at) FROM observations WHERE key IN (`+placeholders(len(o.Keys))+`)`,
				keyArgs(o.Keys)...).Scan(&prev)
			if err != nil {
				return fmt.Errorf("observe %s: %w", o.Keys[0], err)
			}
			c, err := readCurrent(ctx, tx, o.Keys)
			if err != nil {
				return fmt.Errorf("observe %s: %w", o.Keys[0], err)
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO observations (key, fingerprint, run_id, iso_week, at) VALUES (?, ?, ?, ?, ?)`,
				string(o.Keys[0]), o.Fingerprint, o.RunID, o.Week.String(), now.UnixMicro())
			if err != nil {
				return fmt.Errorf("observe %s: %w", o.Keys[0], err)
			}
			out[i] = digest.Observed{Would: would(c, o.Fingerprint, now), PreviousAt: fromUs(prev)}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
