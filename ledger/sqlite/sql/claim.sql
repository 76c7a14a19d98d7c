-- The claim and fenced statements (see claim.go). Each runs inside one
-- BEGIN IMMEDIATE transaction per call, one row per statement; the
-- decision itself is made in Go by package ledger's rules. Times are
-- microseconds since the epoch.

-- name: ReadGoverning
-- The receipts under the candidate keys ?1 (a JSON array); the caller
-- picks the first candidate that has one.
SELECT key, state, fingerprint, attempts, claim_token, lease_expires_at,
    next_attempt_at, sent_at, coalesce(provider_ref, ''), maybe_sent, send_started
FROM receipts WHERE key IN (SELECT value FROM json_each(?1));

-- name: NextToken
UPDATE ledger_counters SET value = value + 1 WHERE name = 'claim_token' RETURNING value;

-- name: InsertClaimed
-- A new receipt, claimed: key, key id, fingerprint, token, lease expiry,
-- now, run id, week.
INSERT INTO receipts (key, key_id, state, fingerprint, attempts, claim_token,
    lease_expires_at, first_claimed_at, last_attempt_at, run_id, iso_week, updated_at)
VALUES (?1, ?2, 'claimed', ?3, 1, ?4, ?5, ?6, ?6, ?7, ?8, ?6);

-- name: Quarantine
-- Quarantines receipt ?4 for the conflicting fingerprint ?1: run id ?2, now ?3.
UPDATE receipts SET previous_state = state, state = 'quarantined',
    conflict_fingerprint = ?1, lease_expires_at = NULL,
    maybe_sent = maybe_sent OR (state = 'claimed' AND send_started),
    first_run_id = coalesce(first_run_id, run_id), run_id = ?2, updated_at = ?3
WHERE key = ?4;

-- name: ClaimAgain
-- Claims existing receipt ?7 again: attempts ?1, token ?2, lease expiry ?3,
-- maybe sent ?4, now ?5, run id ?6.
UPDATE receipts SET previous_state = state, state = 'claimed',
    attempts = ?1, claim_token = ?2, lease_expires_at = ?3, send_started = 0,
    maybe_sent = ?4, next_attempt_at = NULL, last_attempt_at = ?5,
    first_run_id = coalesce(first_run_id, run_id), run_id = ?6, updated_at = ?5
WHERE key = ?7;

-- name: InsertEvent
-- A history row: key, at, from state (NULL for a new receipt), to state,
-- run id, detail.
INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
VALUES (?1, ?2, ?3, ?4, ?5, ?6);

-- name: SendStartedAt
-- When the send of key ?1 last started (NULL: never), before a StartSending
-- replaces it.
SELECT send_started_at FROM receipts WHERE key = ?1;

-- name: StartSending
-- Marks the send of key ?2 under token ?3 started at ?1; no row when the
-- claim is stale.
UPDATE receipts SET send_started = 1, send_started_at = ?1, updated_at = ?1
WHERE key = ?2 AND claim_token = ?3 AND state = 'claimed' RETURNING run_id;

-- name: Renew
-- Extends the lease of key ?3 under token ?4 to ?1, at ?2.
UPDATE receipts SET lease_expires_at = ?1, updated_at = ?2
WHERE key = ?3 AND claim_token = ?4 AND state = 'claimed';

-- name: Finish
-- Ends the claim of key ?8 under token ?9: state ?1, now ?2, provider ref
-- ?3, next attempt ?4, maybe sent ?5 (retryable), reason ?6, run id ?7,
-- address key ?10 (stored on a failed receipt; '' none).
UPDATE receipts SET
    previous_state = state, state = ?1, lease_expires_at = NULL,
    sent_at = CASE WHEN ?1 = 'sent' THEN ?2 ELSE sent_at END,
    provider_ref = CASE WHEN ?1 = 'sent' THEN ?3 ELSE provider_ref END,
    next_attempt_at = ?4,
    maybe_sent = CASE WHEN ?1 = 'retryable' THEN ?5 ELSE maybe_sent OR send_started END,
    last_error = CASE WHEN ?1 = 'sent' THEN last_error ELSE ?6 END,
    address_key = CASE WHEN ?1 = 'failed' THEN nullif(?10, '') ELSE address_key END,
    run_id = ?7, updated_at = ?2
WHERE key = ?8 AND claim_token = ?9 AND state = 'claimed';

-- name: LastObserved
-- The latest observation of any of the candidate keys ?1 (a JSON array).
SELECT max(at) FROM observations WHERE key IN (SELECT value FROM json_each(?1));

-- name: InsertObservation
INSERT INTO observations (key, fingerprint, run_id, iso_week, at) VALUES (?1, ?2, ?3, ?4, ?5);

-- name: EndClaim
-- Ends, for reason ?3 (run id ?4, now ?1), the receipt of week ?5 under
-- the candidate keys ?2 (a JSON array) that no run is finishing: a claim
-- whose lease has expired, or a retryable receipt. One whose send may
-- have started ends held, the rest failed (digest.ClaimEnder). With a
-- cutoff ?6 (a prune's; NULL for a run's), it skips a receipt of a week a
-- run started since the cutoff (Store.EndStaleClaims).
UPDATE receipts SET previous_state = state,
    state = CASE WHEN send_started OR maybe_sent THEN 'held' ELSE 'failed' END,
    maybe_sent = maybe_sent OR (state = 'claimed' AND send_started),
    lease_expires_at = NULL, next_attempt_at = NULL, last_error = ?3,
    run_id = ?4, updated_at = ?1
WHERE key IN (SELECT value FROM json_each(?2)) AND iso_week = ?5
    AND ((state = 'claimed' AND lease_expires_at <= ?1) OR state = 'retryable')
    AND (?6 IS NULL OR iso_week NOT IN (SELECT iso_week FROM week_runs WHERE last_started_at >= ?6))
RETURNING key, previous_state, state;
