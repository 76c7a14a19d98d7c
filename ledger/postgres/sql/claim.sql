-- The claim statements (see claim.go). ClaimMany and ClaimOne decide the
-- same way; ClaimOne takes scalar arguments, because a single-row statement
-- plans in a fraction of the time of the unnest.

-- name: ClaimMany
-- Decides a set of ClaimRequests, one row each; no two requests share a
-- candidate key (see rounds). $1 candidate keys of each request joined by
-- ',' (current first), $2 fingerprints, $3 the ISO week of them all (one
-- statement per week: the week as a constant reaches one partition of
-- receipts when planned), $4 run ids, $5 leases in microseconds, $6 the
-- stand-in for the ledger's clock (NULL but in tests: now()), $7-$11 the
-- history texts (ledger.ClaimHistoryTexts). Every time it compares or
-- stamps is the ledger's: the lease ends its length after now(), and a
-- claim is taken over once now() passes it, whatever the caller's clock.
-- It returns the ledger's time last (ledger.CallTimes).
WITH target AS (
    SELECT q.idx, q.fingerprint, q.week, q.run_id,
        coalesce($6::timestamptz, now()) + q.lease * interval '1 microsecond' AS lease,
        coalesce($6::timestamptz, now()) AS now,
        -- The first candidate holding a receipt governs (an older key id
        -- after a rotation); with none, a new receipt goes under the
        -- current key.
        -- One primary-key probe per candidate (OFFSET 0 keeps it a probe:
        -- key = ANY(keys) was planned as a sequential scan per request by a
        -- generic plan made while receipts was small). A lone candidate
        -- (no key rotation) is the key whatever a probe finds: no probe.
        CASE WHEN cardinality(q.keys) = 1 THEN q.keys[1] ELSE coalesce(
            (SELECT c.k FROM unnest(q.keys) WITH ORDINALITY AS c(k, n)
               CROSS JOIN LATERAL (SELECT 1 FROM receipts x WHERE x.key = c.k AND x.iso_week = $3::text OFFSET 0) x
              ORDER BY c.n LIMIT 1),
            q.keys[1]) END AS key
    FROM (
        SELECT u.idx, string_to_array(u.cands, ',') AS keys, u.fingerprint, $3::text AS week, u.run_id, u.lease
        FROM unnest($1::text[], $2::text[], $4::text[], $5::bigint[]) WITH ORDINALITY
            AS u(cands, fingerprint, run_id, lease, idx)
    ) q
),
claim AS (
    INSERT INTO receipts AS r (key, key_id, state, fingerprint, attempts, claim_token,
        lease_expires_at, first_claimed_at, last_attempt_at, run_id, iso_week, updated_at)
    SELECT t.key, split_part(t.key, ':', 1), 'claimed', t.fingerprint, 1, nextval('receipt_claim_token'),
        t.lease, t.now, t.now, t.run_id, t.week, t.now
    FROM target t ORDER BY t.key
    ON CONFLICT (key, iso_week) DO UPDATE SET
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
        -- The first claim's run, kept once a later claim replaces run_id
        -- (ledger.ReceiptStory tells the first claim with it).
        first_run_id = coalesce(r.first_run_id, r.run_id),
        run_id = excluded.run_id,
        updated_at = excluded.updated_at
    -- Another fingerprint quarantines any receipt but a quarantined one
    -- and an acknowledged one (final: an operator closed it, and no
    -- content change reopens it).
    WHERE CASE WHEN r.fingerprint <> excluded.fingerprint THEN r.state NOT IN ('quarantined', 'acknowledged')
        ELSE (r.state = 'retryable' AND r.next_attempt_at <= excluded.updated_at)
          OR (r.state = 'claimed' AND r.lease_expires_at <= excluded.updated_at) END
    RETURNING r.key, r.state, r.previous_state, r.fingerprint, r.attempts, r.claim_token,
        r.lease_expires_at, r.next_attempt_at, r.sent_at, r.provider_ref, r.maybe_sent, r.run_id, r.updated_at
),
event AS (
    INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
    SELECT c.key, c.updated_at, c.previous_state, c.state, c.run_id,
        -- The texts are ledger's History* constants, passed as $7-$11.
        CASE WHEN c.state = 'quarantined' THEN $7::text
             WHEN c.previous_state IS NULL THEN $8::text
             WHEN c.previous_state = 'claimed' THEN $9::text
             ELSE $10::text END
        || CASE WHEN c.state = 'claimed' AND c.maybe_sent THEN $11::text ELSE '' END
    FROM claim c
    -- A new receipt (no previous state) gets no row: its first_claimed_at
    -- and run_id tell the claim (ledger.ReceiptStory).
    WHERE c.previous_state IS NOT NULL
)
SELECT t.idx, true, c.key, c.state, c.fingerprint, c.attempts, c.claim_token,
    c.lease_expires_at, c.next_attempt_at, c.sent_at, c.provider_ref, c.maybe_sent,
    -- Taken over from an expired claim, maybe sent: its send may still be
    -- landing (see digest.ClaimResult.TakenOverAt).
    c.state = 'claimed' AND c.previous_state = 'claimed' AND c.maybe_sent, t.now
FROM target t JOIN claim c ON c.key = t.key
UNION ALL
SELECT t.idx, false, x.key, x.state, x.fingerprint, x.attempts, x.claim_token,
    x.lease_expires_at, x.next_attempt_at, x.sent_at, x.provider_ref, x.maybe_sent, false, t.now
FROM target t
-- OFFSET 0 keeps this a per-key index probe: joined as a whole, a plan made
-- while receipts was small would hash it, reading every row each time.
CROSS JOIN LATERAL (SELECT * FROM receipts x WHERE x.key = t.key AND x.iso_week = $3::text OFFSET 0) x
WHERE NOT EXISTS (SELECT 1 FROM claim c WHERE c.key = t.key);

-- name: ClaimOne
-- ClaimMany for one request: $1-$5 scalars, the rest as ClaimMany.
WITH target AS (
    SELECT q.idx, q.fingerprint, q.week, q.run_id,
        coalesce($6::timestamptz, now()) + q.lease * interval '1 microsecond' AS lease,
        coalesce($6::timestamptz, now()) AS now,
        -- The first candidate holding a receipt governs (an older key id
        -- after a rotation); with none, a new receipt goes under the
        -- current key.
        -- One primary-key probe per candidate (OFFSET 0 keeps it a probe:
        -- key = ANY(keys) was planned as a sequential scan per request by a
        -- generic plan made while receipts was small). A lone candidate
        -- (no key rotation) is the key whatever a probe finds: no probe.
        CASE WHEN cardinality(q.keys) = 1 THEN q.keys[1] ELSE coalesce(
            (SELECT c.k FROM unnest(q.keys) WITH ORDINALITY AS c(k, n)
               CROSS JOIN LATERAL (SELECT 1 FROM receipts x WHERE x.key = c.k AND x.iso_week = $3::text OFFSET 0) x
              ORDER BY c.n LIMIT 1),
            q.keys[1]) END AS key
    FROM (
        SELECT u.idx, string_to_array(u.cands, ',') AS keys, u.fingerprint, u.week, u.run_id, u.lease
        FROM (VALUES ($1::text, $2::text, $3::text, $4::text, $5::bigint, 1::bigint))
            AS u(cands, fingerprint, week, run_id, lease, idx)
    ) q
),
claim AS (
    INSERT INTO receipts AS r (key, key_id, state, fingerprint, attempts, claim_token,
        lease_expires_at, first_claimed_at, last_attempt_at, run_id, iso_week, updated_at)
    SELECT t.key, split_part(t.key, ':', 1), 'claimed', t.fingerprint, 1, nextval('receipt_claim_token'),
        t.lease, t.now, t.now, t.run_id, t.week, t.now
    FROM target t ORDER BY t.key
    ON CONFLICT (key, iso_week) DO UPDATE SET
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
        -- The first claim's run, kept once a later claim replaces run_id
        -- (ledger.ReceiptStory tells the first claim with it).
        first_run_id = coalesce(r.first_run_id, r.run_id),
        run_id = excluded.run_id,
        updated_at = excluded.updated_at
    -- Another fingerprint quarantines any receipt but a quarantined one
    -- and an acknowledged one (final: an operator closed it, and no
    -- content change reopens it).
    WHERE CASE WHEN r.fingerprint <> excluded.fingerprint THEN r.state NOT IN ('quarantined', 'acknowledged')
        ELSE (r.state = 'retryable' AND r.next_attempt_at <= excluded.updated_at)
          OR (r.state = 'claimed' AND r.lease_expires_at <= excluded.updated_at) END
    RETURNING r.key, r.state, r.previous_state, r.fingerprint, r.attempts, r.claim_token,
        r.lease_expires_at, r.next_attempt_at, r.sent_at, r.provider_ref, r.maybe_sent, r.run_id, r.updated_at
),
event AS (
    INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
    SELECT c.key, c.updated_at, c.previous_state, c.state, c.run_id,
        -- The texts are ledger's History* constants, passed as $7-$11.
        CASE WHEN c.state = 'quarantined' THEN $7::text
             WHEN c.previous_state IS NULL THEN $8::text
             WHEN c.previous_state = 'claimed' THEN $9::text
             ELSE $10::text END
        || CASE WHEN c.state = 'claimed' AND c.maybe_sent THEN $11::text ELSE '' END
    FROM claim c
    -- A new receipt (no previous state) gets no row: its first_claimed_at
    -- and run_id tell the claim (ledger.ReceiptStory).
    WHERE c.previous_state IS NOT NULL
)
SELECT t.idx, true, c.key, c.state, c.fingerprint, c.attempts, c.claim_token,
    c.lease_expires_at, c.next_attempt_at, c.sent_at, c.provider_ref, c.maybe_sent,
    -- Taken over from an expired claim, maybe sent: its send may still be
    -- landing (see digest.ClaimResult.TakenOverAt).
    c.state = 'claimed' AND c.previous_state = 'claimed' AND c.maybe_sent, t.now
FROM target t JOIN claim c ON c.key = t.key
UNION ALL
SELECT t.idx, false, x.key, x.state, x.fingerprint, x.attempts, x.claim_token,
    x.lease_expires_at, x.next_attempt_at, x.sent_at, x.provider_ref, x.maybe_sent, false, t.now
FROM target t
-- OFFSET 0 keeps this a per-key index probe: joined as a whole, a plan made
-- while receipts was small would hash it, reading every row each time.
CROSS JOIN LATERAL (SELECT * FROM receipts x WHERE x.key = t.key AND x.iso_week = $3::text OFFSET 0) x
WHERE NOT EXISTS (SELECT 1 FROM claim c WHERE c.key = t.key);

-- name: ReadGoverning
-- Reads the governing receipt of week $2 among candidate keys $1 (the
-- first that has one), in the columns of ClaimMany; $3 the stand-in for
-- the ledger's clock.
SELECT 0, false, r.key, r.state, r.fingerprint, r.attempts, r.claim_token,
    r.lease_expires_at, r.next_attempt_at, r.sent_at, r.provider_ref, r.maybe_sent, false,
    coalesce($3::timestamptz, now())
FROM unnest($1::text[]) WITH ORDINALITY AS c(k, n)
CROSS JOIN LATERAL (SELECT * FROM receipts x WHERE x.key = c.k AND x.iso_week = $2::text OFFSET 0) r
ORDER BY c.n LIMIT 1;
