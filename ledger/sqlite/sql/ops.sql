-- Operator statements (see ops.go): review, release, mark sent, counts.

-- name: ListReceipts
-- Receipts in state ?1 ('' any) of week ?2 ('' any) after key ?3, at most ?4.
SELECT key, key_id, state, fingerprint, coalesce(conflict_fingerprint, ''), attempts,
    claim_token, lease_expires_at, send_started, send_started_at, maybe_sent, next_attempt_at,
    first_claimed_at, last_attempt_at, sent_at, coalesce(provider_ref, ''), coalesce(last_error, ''),
    run_id, iso_week, updated_at, coalesce(first_run_id, ''), coalesce(address_key, ''),
    coalesce(digest_type, ''), coalesce(content_version, '')
FROM receipts
WHERE (?1 = '' OR state = ?1) AND (?2 = '' OR iso_week = ?2) AND key > ?3
ORDER BY key LIMIT ?4;

-- name: ShowReceipt
-- One receipt, in the columns of ListReceipts.
SELECT key, key_id, state, fingerprint, coalesce(conflict_fingerprint, ''), attempts,
    claim_token, lease_expires_at, send_started, send_started_at, maybe_sent, next_attempt_at,
    first_claimed_at, last_attempt_at, sent_at, coalesce(provider_ref, ''), coalesce(last_error, ''),
    run_id, iso_week, updated_at, coalesce(first_run_id, ''), coalesce(address_key, ''),
    coalesce(digest_type, ''), coalesce(content_version, '')
FROM receipts WHERE key = ?1;

-- name: ShowEvents
-- The history of key ?1, oldest first.
SELECT id, key, at, coalesce(from_state, ''), to_state, run_id, detail
FROM receipt_events WHERE key = ?1 ORDER BY id;

-- name: ReleaseHeld
-- Makes held receipt ?1 retryable and due at ?2, clearing the send marks.
UPDATE receipts SET previous_state = state, state = 'retryable',
    next_attempt_at = ?2, maybe_sent = 0, send_started = 0, updated_at = ?2
WHERE key = ?1;

-- name: ReleaseQuarantined
-- Makes quarantined receipt ?1 retryable and due at ?2, adopting the
-- conflicting fingerprint and keeping MaybeSent if a send may have started.
UPDATE receipts SET previous_state = state, state = 'retryable',
    fingerprint = coalesce(conflict_fingerprint, fingerprint), conflict_fingerprint = NULL,
    -- The adopted fingerprint's parts are not kept: a later quarantine
    -- says which part changed is not recorded.
    fingerprint_parts = CASE WHEN conflict_fingerprint IS NULL THEN fingerprint_parts END,
    maybe_sent = maybe_sent OR send_started, send_started = 0,
    next_attempt_at = ?2, updated_at = ?2
WHERE key = ?1;

-- name: MarkSent
-- Records held receipt ?1 as sent at ?2 under provider reference ?3.
UPDATE receipts SET previous_state = state, state = 'sent',
    sent_at = ?2, provider_ref = ?3, updated_at = ?2
WHERE key = ?1;

-- name: Acknowledge
-- Closes quarantined or held receipt ?1 at ?2: acknowledged, keeping its
-- fingerprints, sent time and provider reference as evidence.
UPDATE receipts SET previous_state = state, state = 'acknowledged',
    lease_expires_at = NULL, next_attempt_at = NULL, updated_at = ?2
WHERE key = ?1;

-- name: CountByState
-- Week ?1's receipts by state, with the oldest claimed one's last attempt
-- and the oldest retryable one's last change.
SELECT state, count(*),
    min(CASE WHEN state = 'claimed' THEN last_attempt_at END), min(CASE WHEN state = 'retryable' THEN updated_at END)
FROM receipts WHERE iso_week = ?1 GROUP BY state;

-- name: WeekUnfinished
-- How many of week ?1's receipts are claimed or retryable (the index
-- receipts_week_state).
SELECT count(*) FROM receipts WHERE iso_week = ?1 AND state IN ('claimed', 'retryable');

-- name: Repeats
-- The gaps between consecutive observations of each key of week ?1 ('' all
-- weeks), bucketed at ?2 (five minutes), ?3 (a day) and ?4 (the horizon),
-- all in microseconds.
WITH o AS (
    SELECT key, at - lag(at) OVER (PARTITION BY key ORDER BY at, id) AS gap
    FROM observations WHERE ?1 = '' OR iso_week = ?1
)
SELECT count(*), count(DISTINCT key),
    coalesce(sum(gap < ?2), 0), coalesce(sum(gap >= ?2 AND gap < ?3), 0),
    coalesce(sum(gap >= ?3 AND gap <= ?4), 0), coalesce(sum(gap > ?4), 0)
FROM o;
