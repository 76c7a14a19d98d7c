-- The claim and fenced statements (see claim.go). Each runs inside one
-- BEGIN IMMEDIATE transaction per call, one row per statement; the
-- decision itself is made in Go by package ledger's rules. Arguments are
-- named (:name, bound with sql.Named). Times are microseconds since the
-- epoch.

-- name: ReadGoverning
-- The receipts under the candidate keys :keys (a JSON array); the caller
-- picks the first candidate that has one.
SELECT key, state, fingerprint, attempts, claim_token, lease_expires_at,
    next_attempt_at, sent_at, coalesce(provider_ref, ''), maybe_sent, send_started
FROM receipts WHERE key IN (SELECT value FROM json_each(:keys));

-- name: NextToken
UPDATE ledger_counters SET value = value + 1 WHERE name = 'claim_token' RETURNING value;

-- name: InsertClaimed
-- A new receipt, claimed, with its digest type and content version
-- (NULL for '').
INSERT INTO receipts (key, key_id, state, fingerprint, fingerprint_parts, attempts, claim_token,
    lease_expires_at, first_claimed_at, last_attempt_at, run_id, iso_week, updated_at, digest_type, content_version)
VALUES (:key, :key_id, 'claimed', :fingerprint, nullif(:parts, ''), 1, :token, :lease, :now, :now, :run_id, :week, :now,
    nullif(:digest_type, ''), nullif(:content_version, ''));

-- name: FingerprintParts
-- The stored fingerprint parts of :key ('' when not recorded), for the
-- history of its quarantine.
SELECT coalesce(fingerprint_parts, '') FROM receipts WHERE key = :key;

-- name: Quarantine
-- Quarantines receipt :key for the conflicting fingerprint :fingerprint.
UPDATE receipts SET previous_state = state, state = 'quarantined',
    conflict_fingerprint = :fingerprint, lease_expires_at = NULL,
    maybe_sent = maybe_sent OR (state = 'claimed' AND send_started),
    first_run_id = coalesce(first_run_id, run_id), run_id = :run_id, updated_at = :now
WHERE key = :key;

-- name: ClaimAgain
-- Claims existing receipt :key again. One made before receipts stored
-- their version is of the version whose key found it.
UPDATE receipts SET previous_state = state, state = 'claimed',
    attempts = :attempts, claim_token = :token, lease_expires_at = :lease, send_started = 0,
    maybe_sent = :maybe_sent, next_attempt_at = NULL, last_attempt_at = :now,
    first_run_id = coalesce(first_run_id, run_id), run_id = :run_id, updated_at = :now,
    digest_type = coalesce(digest_type, nullif(:digest_type, '')),
    content_version = coalesce(content_version, nullif(:content_version, ''))
WHERE key = :key;

-- name: InsertEvent
-- A history row; :from_state is NULL for a new receipt.
INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
VALUES (:key, :at, :from_state, :to_state, :run_id, :detail);

-- name: SendStartedAt
-- When the send of :key last started (NULL: never), before a StartSending
-- replaces it.
SELECT send_started_at FROM receipts WHERE key = :key;

-- name: StartSending
-- Marks the send of :key under :token started :now; no row when the claim
-- is stale.
UPDATE receipts SET send_started = 1, send_started_at = :now, updated_at = :now
WHERE key = :key AND claim_token = :token AND state = 'claimed' RETURNING run_id;

-- name: Renew
-- Extends the lease of :key under :token to :lease.
UPDATE receipts SET lease_expires_at = :lease, updated_at = :now
WHERE key = :key AND claim_token = :token AND state = 'claimed';

-- name: Finish
-- Ends the claim of :key under :token in :state; :next_attempt and
-- :maybe_sent are a retryable one's, :address_key a failed one's ('' none).
UPDATE receipts SET
    previous_state = state, state = :state, lease_expires_at = NULL,
    sent_at = CASE WHEN :state = 'sent' THEN :now ELSE sent_at END,
    provider_ref = CASE WHEN :state = 'sent' THEN :provider_ref ELSE provider_ref END,
    next_attempt_at = :next_attempt,
    maybe_sent = CASE WHEN :state = 'retryable' THEN :maybe_sent ELSE maybe_sent OR send_started END,
    last_error = CASE WHEN :state = 'sent' THEN last_error ELSE :reason END,
    address_key = CASE WHEN :state = 'failed' THEN nullif(:address_key, '') ELSE address_key END,
    run_id = :run_id, updated_at = :now
WHERE key = :key AND claim_token = :token AND state = 'claimed';

-- name: LastObserved
-- The latest observation of any of the candidate keys ?1 (a JSON array).
SELECT max(at) FROM observations WHERE key IN (SELECT value FROM json_each(?1));

-- name: InsertObservation
INSERT INTO observations (key, fingerprint, run_id, iso_week, at) VALUES (?1, ?2, ?3, ?4, ?5);

-- name: EndClaim
-- Ends, for :reason, the receipt of :week under the candidate keys :keys
-- (a JSON array) that no run is finishing: a claim whose lease has
-- expired, or a retryable receipt. One whose send may have started ends
-- held, the rest failed (digest.ClaimEnder). With a :cutoff (a prune's;
-- NULL for a run's), it skips a receipt of a week a run started since the
-- cutoff (Store.EndStaleClaims).
UPDATE receipts SET previous_state = state,
    state = CASE WHEN send_started OR maybe_sent THEN 'held' ELSE 'failed' END,
    maybe_sent = maybe_sent OR (state = 'claimed' AND send_started),
    lease_expires_at = NULL, next_attempt_at = NULL, last_error = :reason,
    run_id = :run_id, updated_at = :now
WHERE key IN (SELECT value FROM json_each(:keys)) AND iso_week = :week
    AND ((state = 'claimed' AND lease_expires_at <= :now) OR state = 'retryable')
    AND (:cutoff IS NULL OR iso_week NOT IN (SELECT iso_week FROM week_runs WHERE last_started_at >= :cutoff))
RETURNING key, previous_state, state;
