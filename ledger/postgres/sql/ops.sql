-- Operator statements (see ops.go): review, release, mark sent, counts.

-- name: ListReceipts
-- Receipts in state $1 ('' any) of week $2 ('' any) after key $3, at most $4.
-- A state that waits for someone is also asked of attention (migration
-- 00012), the column the attention index holds: planned with $1 known,
-- that condition is what reaches the index.
SELECT key, key_id, state, fingerprint, coalesce(conflict_fingerprint, ''), attempts,
    claim_token, lease_expires_at, send_started, send_started_at, maybe_sent, next_attempt_at,
    first_claimed_at, last_attempt_at, sent_at, coalesce(provider_ref, ''), coalesce(last_error, ''),
    run_id, iso_week, updated_at, coalesce(first_run_id, ''), coalesce(address_key, ''),
    coalesce(digest_type, ''), coalesce(content_version, '')
FROM receipts
WHERE ($1 = '' OR state = $1) AND ($1 IN ('', 'claimed', 'sent') OR attention = $1)
    AND ($2 = '' OR iso_week = $2) AND key > $3
ORDER BY key LIMIT $4;

-- name: ShowReceipt
-- One receipt, in the columns of ListReceipts.
SELECT key, key_id, state, fingerprint, coalesce(conflict_fingerprint, ''), attempts,
    claim_token, lease_expires_at, send_started, send_started_at, maybe_sent, next_attempt_at,
    first_claimed_at, last_attempt_at, sent_at, coalesce(provider_ref, ''), coalesce(last_error, ''),
    run_id, iso_week, updated_at, coalesce(first_run_id, ''), coalesce(address_key, ''),
    coalesce(digest_type, ''), coalesce(content_version, '')
FROM receipts WHERE key = $1;

-- name: LockReceipt
-- ShowReceipt, locking the row for an operator's change.
SELECT key, key_id, state, fingerprint, coalesce(conflict_fingerprint, ''), attempts,
    claim_token, lease_expires_at, send_started, send_started_at, maybe_sent, next_attempt_at,
    first_claimed_at, last_attempt_at, sent_at, coalesce(provider_ref, ''), coalesce(last_error, ''),
    run_id, iso_week, updated_at, coalesce(first_run_id, ''), coalesce(address_key, ''),
    coalesce(digest_type, ''), coalesce(content_version, '')
FROM receipts WHERE key = $1 FOR UPDATE;

-- name: ShowEvents
-- The history of key $1, oldest first.
SELECT id, key, at, coalesce(from_state, ''), to_state, run_id, detail
FROM receipt_events WHERE key = $1 ORDER BY id;

-- name: ReleaseHeld
-- Makes held receipt $1 retryable and due at $2, clearing the send marks.
UPDATE receipts SET previous_state = state, state = 'retryable',
    next_attempt_at = $2, maybe_sent = false, send_started = false, updated_at = $2
WHERE key = $1;

-- name: ReleaseQuarantined
-- Makes quarantined receipt $1 retryable and due at $2, adopting the
-- conflicting fingerprint and keeping MaybeSent if a send may have started.
UPDATE receipts SET previous_state = state, state = 'retryable',
    fingerprint = coalesce(conflict_fingerprint, fingerprint), conflict_fingerprint = NULL,
    -- The adopted fingerprint's parts are not kept: a later quarantine
    -- says which part changed is not recorded.
    fingerprint_parts = CASE WHEN conflict_fingerprint IS NULL THEN fingerprint_parts END,
    maybe_sent = maybe_sent OR send_started, send_started = false,
    next_attempt_at = $2, updated_at = $2
WHERE key = $1;

-- name: MarkSent
-- Records held receipt $1 as sent at $2 under provider reference $3.
UPDATE receipts SET previous_state = state, state = 'sent',
    sent_at = $2, provider_ref = $3, updated_at = $2
WHERE key = $1;

-- name: InsertEvent
-- An operator's history row: key $1, at $2, from $3, to $4, detail $5.
INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
VALUES ($1, $2, $3, $4, '', $5);

-- name: Acknowledge
-- Closes quarantined or held receipt $1 at $2: acknowledged, keeping its
-- fingerprints, sent time and provider reference as evidence.
UPDATE receipts SET previous_state = state, state = 'acknowledged',
    lease_expires_at = NULL, next_attempt_at = NULL, updated_at = $2
WHERE key = $1;

-- name: CountByState
-- Week $1's receipts by state, from the counters the receipts' triggers
-- keep (migration 00011): a few rows whatever the size of the week.
SELECT state, sum(n)::bigint FROM week_state_counts WHERE iso_week = $1
GROUP BY state HAVING sum(n) <> 0;

-- name: WeekUnfinished
-- How many of week $1's receipts are claimed or retryable, from the same
-- counters as CountByState.
SELECT coalesce(sum(n), 0)::bigint FROM week_state_counts
WHERE iso_week = $1 AND state IN ('claimed', 'retryable');

-- name: OldestClaimed
-- The last attempt of week $1's oldest claimed receipt (read only when
-- there is one: it scans the week's partition).
SELECT min(last_attempt_at) FROM receipts WHERE iso_week = $1 AND state = 'claimed';

-- name: OldestRetryable
-- The last change of week $1's oldest retryable receipt (through the
-- receipts_attention index).
SELECT min(updated_at) FROM receipts WHERE iso_week = $1 AND state = 'retryable';

-- name: DropWeekCounts
-- The counters of weeks $1, whose partitions prune dropped.
DELETE FROM week_state_counts WHERE iso_week = ANY($1::text[]);

-- name: Repeats
-- The gaps between consecutive observations of each key of week $1 ('' all
-- weeks), bucketed; $2 the horizon.
WITH o AS (
    SELECT key, at - lag(at) OVER (PARTITION BY key ORDER BY at, id) AS gap
    FROM observations WHERE $1 = '' OR iso_week = $1
)
SELECT count(*), count(DISTINCT key),
    count(*) FILTER (WHERE gap < interval '5 minutes'),
    count(*) FILTER (WHERE gap >= interval '5 minutes' AND gap < interval '24 hours'),
    count(*) FILTER (WHERE gap >= interval '24 hours' AND gap <= $2),
    count(*) FILTER (WHERE gap > $2)
FROM o;
