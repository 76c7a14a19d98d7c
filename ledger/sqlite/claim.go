package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/internal/rules"
)

// The claim and fenced statements, in sql/claim.sql.
var (
	readGoverningSQL     = queries.Get("ReadGoverning")
	nextTokenSQL         = queries.Get("NextToken")
	insertClaimedSQL     = queries.Get("InsertClaimed")
	quarantineSQL        = queries.Get("Quarantine")
	claimAgainSQL        = queries.Get("ClaimAgain")
	insertEventSQL       = queries.Get("InsertEvent")
	fingerprintPartsSQL  = queries.Get("FingerprintParts")
	sendStartedAtSQL     = queries.Get("SendStartedAt")
	startSendingSQL      = queries.Get("StartSending")
	renewSQL             = queries.Get("Renew")
	finishSQL            = queries.Get("Finish")
	lastObservedSQL      = queries.Get("LastObserved")
	insertObservationSQL = queries.Get("InsertObservation")
	endClaimSQL          = queries.Get("EndClaim")
)

// Claim decides every request in one BEGIN IMMEDIATE transaction. The
// write lock is taken before the first read, so reading the receipt and
// writing the decision cannot interleave with another writer. Leases are
// set and compared by the ledger's clock (ledgerTime); the results' times
// are converted to the caller's (ledger.CallTimes).
func (s *Store) Claim(ctx context.Context, reqs []digest.ClaimRequest) (_ []digest.ClaimResult, err error) {
	defer classify(&err)
	if err := rules.ValidateClaims(reqs); err != nil {
		return nil, err
	}
	asked := s.nowUTC()
	res := make([]digest.ClaimResult, len(reqs))
	err = s.writeAt(ctx, func(tx sqliteTx, now time.Time) error {
		times := ledger.CallTimes{Ledger: now, Caller: asked}
		for i, r := range reqs {
			got, err := claimOne(ctx, tx, r, now)
			if err != nil {
				return fmt.Errorf("claim %s: %w", r.Keys[0], err)
			}
			res[i] = times.Result(got)
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
	c, err := readGoverning(ctx, tx, r.Keys)
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
		_, err = tx.ExecContext(ctx, insertClaimedSQL, sql.Named("key", string(key)), sql.Named("key_id", key.KeyID()),
			sql.Named("fingerprint", r.Fingerprint), sql.Named("parts", r.Parts), sql.Named("token", token), sql.Named("lease", now.Add(r.Lease).UnixMicro()),
			sql.Named("now", now.UnixMicro()), sql.Named("run_id", r.RunID), sql.Named("week", r.Week.String()),
			sql.Named("digest_type", r.Type), sql.Named("content_version", r.Version))
		if err != nil {
			return digest.ClaimResult{}, err
		}
		c = &rules.Stored{Key: key, State: digest.StateClaimed, Attempts: 1, Token: token, LeaseExpires: now.Add(r.Lease)}
		// No history row: first_claimed_at and run_id tell the claim
		// (ledger.ReceiptStory).
		return rules.Claimed(c, now), nil

	// Acknowledged is final: no content change reopens it.
	case c.Fingerprint != r.Fingerprint && c.State != digest.StateQuarantined && c.State != digest.StateAcknowledged:
		var stored string
		if err := tx.QueryRowContext(ctx, fingerprintPartsSQL, sql.Named("key", string(c.Key))).Scan(&stored); err != nil {
			return digest.ClaimResult{}, err
		}
		_, err := tx.ExecContext(ctx, quarantineSQL, sql.Named("fingerprint", r.Fingerprint), sql.Named("run_id", r.RunID),
			sql.Named("now", now.UnixMicro()), sql.Named("key", string(c.Key)))
		if err != nil {
			return digest.ClaimResult{}, err
		}
		err = sqliteEvent(ctx, tx, c.Key, now, c.State, digest.StateQuarantined, r.RunID, ledger.QuarantineDetail(stored, r.Parts))
		return digest.ClaimResult{Outcome: digest.OutcomeQuarantined, Key: c.Key}, err

	case c.Fingerprint == r.Fingerprint && c.Claimable(now):
		token, err := nextToken(ctx, tx)
		if err != nil {
			return digest.ClaimResult{}, err
		}
		from := c.State
		c.MaybeSent = c.MaybeSent || from == digest.StateClaimed && c.SendStarted
		c.TakenOver = from == digest.StateClaimed && c.MaybeSent
		c.LeaseExpires = now.Add(r.Lease)
		detail := ledger.ClaimHistory(from, digest.StateClaimed, c.MaybeSent)
		c.State, c.Token, c.Attempts = digest.StateClaimed, token, c.Attempts+1
		_, err = tx.ExecContext(ctx, claimAgainSQL, sql.Named("attempts", c.Attempts), sql.Named("token", token),
			sql.Named("lease", now.Add(r.Lease).UnixMicro()), sql.Named("maybe_sent", c.MaybeSent), sql.Named("now", now.UnixMicro()),
			sql.Named("run_id", r.RunID), sql.Named("key", string(c.Key)),
			sql.Named("digest_type", r.Type), sql.Named("content_version", r.Version))
		if err != nil {
			return digest.ClaimResult{}, err
		}
		return rules.Claimed(c, now), sqliteEvent(ctx, tx, c.Key, now, from, digest.StateClaimed, r.RunID, detail)
	}
	return rules.Unclaimed(c, r.Fingerprint, now), nil
}

// readGoverning returns the governing receipt among keys (the first candidate
// that has one), or nil.
func readGoverning(ctx context.Context, tx sqliteTx, keys []digest.Key) (*rules.Stored, error) {
	rows, err := tx.QueryContext(ctx, readGoverningSQL, sql.Named("keys", jsonKeys(keys)))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var best *rules.Stored
	bestAt := len(keys)
	for rows.Next() {
		var (
			c                   rules.Stored
			key, state          string
			lease, next, sentAt sql.NullInt64
		)
		if err := rows.Scan(&key, &state, &c.Fingerprint, &c.Attempts, &c.Token, &lease, &next, &sentAt,
			&c.ProviderRef, &c.MaybeSent, &c.SendStarted); err != nil {
			return nil, err
		}
		c.Key, c.State = digest.Key(key), digest.State(state)
		c.LeaseExpires, c.NextAttempt, c.SentAt = fromMicros(lease), fromMicros(next), fromMicros(sentAt)
		if at := slices.Index(keys, c.Key); at < bestAt {
			best, bestAt = &c, at
		}
	}
	return best, rows.Err()
}

func nextToken(ctx context.Context, tx sqliteTx) (int64, error) {
	var token int64
	err := tx.QueryRowContext(ctx, nextTokenSQL).Scan(&token)
	return token, err
}

func sqliteEvent(ctx context.Context, tx sqliteTx, key digest.Key, at time.Time, from, to digest.State, runID, detail string) error {
	var fromState any
	if from != "" {
		fromState = string(from)
	}
	_, err := tx.ExecContext(ctx, insertEventSQL, sql.Named("key", string(key)), sql.Named("at", at.UnixMicro()),
		sql.Named("from_state", fromState), sql.Named("to_state", string(to)), sql.Named("run_id", runID), sql.Named("detail", detail))
	return err
}

// StartSending marks each fence's send as started, in one transaction.
func (s *Store) StartSending(ctx context.Context, fences []digest.Fence) (_ []error, err error) {
	defer classify(&err)
	errs := make([]error, len(fences))
	err = s.writeAt(ctx, func(tx sqliteTx, now time.Time) error {
		for i, f := range fences {
			var (
				runID   string
				earlier sql.NullInt64
			)
			err := tx.QueryRowContext(ctx, sendStartedAtSQL, sql.Named("key", string(f.Key))).Scan(&earlier)
			if errors.Is(err, sql.ErrNoRows) {
				errs[i] = digest.ErrStaleClaim
				continue
			}
			if err == nil {
				err = tx.QueryRowContext(ctx, startSendingSQL, sql.Named("now", now.UnixMicro()), sql.Named("key", string(f.Key)),
					sql.Named("token", f.Token)).Scan(&runID)
			}
			if errors.Is(err, sql.ErrNoRows) {
				errs[i] = digest.ErrStaleClaim
				continue
			}
			// No row for this start: send_started_at tells it
			// (ledger.ReceiptStory). An earlier start it replaces gets
			// its row, at its own time; that claim's run id is no longer
			// stored.
			if err == nil && earlier.Valid {
				err = sqliteEvent(ctx, tx, f.Key, fromMicros(earlier), digest.StateClaimed, digest.StateClaimed, "", ledger.HistorySendStarted)
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

// Renew extends each fence's lease to lease from the ledger's time, in
// one transaction; the expiry it returns is lease from the caller's time
// before the call. Like the PostgreSQL statement, it writes no history
// row.
func (s *Store) Renew(ctx context.Context, fences []digest.Fence, lease time.Duration) (_ time.Time, _ []error, err error) {
	defer classify(&err)
	if lease <= 0 {
		return time.Time{}, nil, fmt.Errorf("%w: renew: lease must be positive", ledger.ErrInvalid)
	}
	expires := s.nowUTC().Add(lease)
	errs := make([]error, len(fences))
	err = s.writeAt(ctx, func(tx sqliteTx, now time.Time) error {
		for i, f := range fences {
			res, err := tx.ExecContext(ctx, renewSQL, sql.Named("lease", now.Add(lease).UnixMicro()), sql.Named("now", now.UnixMicro()),
				sql.Named("key", string(f.Key)), sql.Named("token", f.Token))
			if err != nil {
				return fmt.Errorf("renew %s: %w", f.Key, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("renew %s: %w", f.Key, err)
			}
			if n == 0 {
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
func (s *Store) Finish(ctx context.Context, fs []digest.Finish) (_ []error, err error) {
	defer classify(&err)
	if err := rules.ValidateFinishes(fs); err != nil {
		return nil, err
	}
	times := ledger.CallTimes{Caller: s.nowUTC()}
	errs := make([]error, len(fs))
	err = s.writeAt(ctx, func(tx sqliteTx, now time.Time) error {
		for i, f := range fs {
			var next any
			if f.State == digest.StateRetryable {
				// The caller's next attempt, as a delay from the ledger's time.
				next = now.Add(times.Delay(f)).UnixMicro()
			}
			res, err := tx.ExecContext(ctx, finishSQL, sql.Named("state", string(f.State)), sql.Named("now", now.UnixMicro()),
				sql.Named("provider_ref", f.ProviderRef), sql.Named("next_attempt", next), sql.Named("maybe_sent", f.MaybeSent),
				sql.Named("reason", f.Reason), sql.Named("run_id", f.RunID), sql.Named("key", string(f.Key)),
				sql.Named("token", f.Token), sql.Named("address_key", f.AddressKey))
			if err != nil {
				return fmt.Errorf("finish %s: %w", f.Key, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("finish %s: %w", f.Key, err)
			}
			if n == 0 {
				errs[i] = digest.ErrStaleClaim
				continue
			}
			if !rules.FinishWritesHistory(f) {
				continue // sent_at and provider_ref tell it (ledger.ReceiptStory)
			}
			if err := sqliteEvent(ctx, tx, f.Key, now, digest.StateClaimed, f.State, f.RunID, ledger.FinishDetail(f)); err != nil {
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
func (s *Store) Observe(ctx context.Context, obs []digest.Observation) (_ []digest.Observed, err error) {
	defer classify(&err)
	if err := rules.ValidateObservations(obs); err != nil {
		return nil, err
	}
	out := make([]digest.Observed, len(obs))
	err = s.writeAt(ctx, func(tx sqliteTx, now time.Time) error {
		for i, o := range obs {
			var prev sql.NullInt64
			err := tx.QueryRowContext(ctx, lastObservedSQL, jsonKeys(o.Keys)).Scan(&prev)
			if err != nil {
				return fmt.Errorf("observe %s: %w", o.Keys[0], err)
			}
			c, err := readGoverning(ctx, tx, o.Keys)
			if err != nil {
				return fmt.Errorf("observe %s: %w", o.Keys[0], err)
			}
			_, err = tx.ExecContext(ctx, insertObservationSQL,
				string(o.Keys[0]), o.Fingerprint, o.RunID, o.Week.String(), now.UnixMicro())
			if err != nil {
				return fmt.Errorf("observe %s: %w", o.Keys[0], err)
			}
			out[i] = digest.Observed{Would: rules.ObservedOutcome(c, o.Fingerprint, now), PreviousAt: fromMicros(prev)}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EndClaims ends the claims no run is finishing (digest.ClaimEnder), in
// one BEGIN IMMEDIATE transaction.
func (s *Store) EndClaims(ctx context.Context, ends []digest.EndClaim) (_ []digest.EndedClaim, err error) {
	defer classify(&err)
	return s.endClaims(ctx, ends, nil)
}

// EndStaleClaims ends a prune's stale claims (ledger.StaleClaimEnder):
// EndClaims skipping the weeks a run started since cutoff, read in the
// same write transaction, which StartWeek's waits for.
func (s *Store) EndStaleClaims(ctx context.Context, cutoff time.Time, ends []digest.EndClaim) (_ []digest.EndedClaim, err error) {
	defer classify(&err)
	return s.endClaims(ctx, ends, cutoff.UnixMicro())
}

// endClaims ends the claims ends in one write transaction; cutoff, when
// not nil, is a prune's (microseconds).
func (s *Store) endClaims(ctx context.Context, ends []digest.EndClaim, cutoff any) ([]digest.EndedClaim, error) {
	if len(ends) == 0 {
		return nil, nil
	}
	var ended []digest.EndedClaim
	err := s.writeAt(ctx, func(tx sqliteTx, now time.Time) error {
		ended = ended[:0]
		for _, e := range ends {
			rows, err := tx.QueryContext(ctx, endClaimSQL, sql.Named("now", now.UnixMicro()), sql.Named("keys", jsonKeys(e.Keys)),
				sql.Named("reason", e.Reason), sql.Named("run_id", e.RunID), sql.Named("week", e.Week.String()), sql.Named("cutoff", cutoff))
			if err != nil {
				return fmt.Errorf("end claim: %w", err)
			}
			first := len(ended)
			for rows.Next() {
				var key, from, to string
				if err := rows.Scan(&key, &from, &to); err != nil {
					rows.Close()
					return fmt.Errorf("end claim: %w", err)
				}
				ended = append(ended, digest.EndedClaim{Key: digest.Key(key), From: digest.State(from), To: digest.State(to)})
			}
			if err := errors.Join(rows.Err(), rows.Close()); err != nil {
				return fmt.Errorf("end claim: %w", err)
			}
			for _, x := range ended[first:] {
				if err := sqliteEvent(ctx, tx, x.Key, now, x.From, x.To, e.RunID, e.Reason); err != nil {
					return fmt.Errorf("end claim %s: %w", x.Key, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ended, nil
}
