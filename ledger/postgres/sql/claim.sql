-- The claim statement (see claim.go), and the read of a receipt it found
-- inserted after its snapshot.

-- name: Claim
-- Decides a set of ClaimRequests, one row each, a single request as a
-- set of one; no two requests share a candidate key (see rounds).
-- @candidates: candidate keys of each request joined by ',' (current
-- first); @fingerprints, @run_ids, @leases (microseconds), @types and
-- @versions (the digest type and content version, '' for none): per request;
-- @week: the ISO week of them all (one statement per week: the week as a
-- constant reaches one partition of receipts when planned); @clock: the
-- stand-in for the ledger's clock (NULL but in tests: now());
-- @parts: per request, its fingerprint parts ('' unknown);
-- @quarantined, @claimed, @taken_over, @claimed_again, @maybe_sent,
-- @parts_unknown, @parts_changed, @parts_other: the history texts
-- (ledger's History* constants, see ledger.QuarantineDetail). Every time
-- it compares or stamps is the ledger's: the lease ends its length after
-- now(), and a claim is taken over once now() passes it, whatever the
-- caller's clock.
-- It returns the ledger's time last (ledger.CallTimes).
WITH target AS (
    SELECT q.idx, q.fingerprint, q.parts, q.week, q.run_id, q.digest_type, q.content_version,
        coalesce(@clock::timestamptz, now()) + q.lease * interval '1 microsecond' AS lease,
        coalesce(@clock::timestamptz, now()) AS now,
        -- The first candidate holding a receipt governs (an older key id
        -- after a rotation); with none, a new receipt goes under the
        -- current key.
        -- One primary-key probe per candidate (OFFSET 0 keeps it a probe:
        -- key = ANY(keys) was planned as a sequential scan per request by a
        -- generic plan made while receipts was small). A lone candidate
        -- (no key rotation) is the key whatever a probe finds: no probe.
        CASE WHEN cardinality(q.keys) = 1 THEN q.keys[1] ELSE coalesce(
            (SELECT c.k FROM unnest(q.keys) WITH ORDINALITY AS c(k, n)
               CROSS JOIN LATERAL (SELECT 1 FROM receipts x WHERE x.key = c.k AND x.iso_week = @week::text OFFSET 0) x
              ORDER BY c.n LIMIT 1),
            q.keys[1]) END AS key
    FROM (
        SELECT u.idx, string_to_array(u.cands, ',') AS keys, u.fingerprint, u.parts, @week::text AS week, u.run_id, u.lease,
            nullif(u.digest_type, '') AS digest_type, nullif(u.content_version, '') AS content_version
        FROM unnest(@candidates::text[], @fingerprints::text[], @parts::text[], @run_ids::text[], @leases::bigint[],
            @types::text[], @versions::text[]) WITH ORDINALITY
            AS u(cands, fingerprint, parts, run_id, lease, digest_type, content_version, idx)
    ) q
),
claim AS (
    INSERT INTO receipts AS r (key, key_id, state, fingerprint, fingerprint_parts, attempts, claim_token,
        lease_expires_at, first_claimed_at, last_attempt_at, run_id, iso_week, updated_at, digest_type, content_version)
    SELECT t.key, split_part(t.key, ':', 1), 'claimed', t.fingerprint, nullif(t.parts, ''), 1, nextval('receipt_claim_token'),
        t.lease, t.now, t.now, t.run_id, t.week, t.now, t.digest_type, t.content_version
    -- In key order, bytewise as receipts.key compares (migration 00017):
    -- two claims over the same keys lock them in one order. The keys
    -- come from a parameter, of the database's collation, which may be a
    -- linguistic one costing a strcoll() a comparison.
    FROM target t ORDER BY t.key COLLATE "C"
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
        updated_at = excluded.updated_at,
        -- A receipt made before receipts stored their version (migration
        -- 00020) is of the version whose key found it: the key is an HMAC
        -- of the version.
        digest_type = coalesce(r.digest_type, excluded.digest_type),
        content_version = coalesce(r.content_version, excluded.content_version)
    -- Another fingerprint quarantines any receipt but a quarantined one
    -- and an acknowledged one (final: an operator closed it, and no
    -- content change reopens it).
    WHERE CASE WHEN r.fingerprint <> excluded.fingerprint THEN r.state NOT IN ('quarantined', 'acknowledged')
        ELSE (r.state = 'retryable' AND r.next_attempt_at <= excluded.updated_at)
          OR (r.state = 'claimed' AND r.lease_expires_at <= excluded.updated_at) END
    RETURNING r.key, r.state, r.previous_state, r.fingerprint, r.attempts, r.claim_token,
        r.lease_expires_at, r.next_attempt_at, r.sent_at, r.provider_ref, r.maybe_sent, r.run_id, r.updated_at,
        r.fingerprint_parts
),
event AS (
    INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
    SELECT c.key, c.updated_at, c.previous_state, c.state, c.run_id,
        -- The texts are ledger's History* constants.
        CASE WHEN c.state = 'quarantined' THEN @quarantined::text || CASE
                 WHEN t.parts = '' THEN ''
                 WHEN coalesce(c.fingerprint_parts, '') = '' THEN @parts_unknown::text
                 -- The parts are "address=H name=H content=H", in that
                 -- order (digest.PartNames); which differ, by position.
                 ELSE @parts_changed::text || coalesce(nullif(concat_ws(', ',
                     CASE WHEN split_part(c.fingerprint_parts, ' ', 1) <> split_part(t.parts, ' ', 1) THEN 'address' END,
                     CASE WHEN split_part(c.fingerprint_parts, ' ', 2) <> split_part(t.parts, ' ', 2) THEN 'name' END,
                     CASE WHEN split_part(c.fingerprint_parts, ' ', 3) <> split_part(t.parts, ' ', 3) THEN 'content' END), ''),
                     @parts_other::text) END
             WHEN c.previous_state IS NULL THEN @claimed::text
             WHEN c.previous_state = 'claimed' THEN @taken_over::text
             ELSE @claimed_again::text END
        || CASE WHEN c.state = 'claimed' AND c.maybe_sent THEN @maybe_sent::text ELSE '' END
    FROM claim c JOIN target t ON t.key = c.key
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
CROSS JOIN LATERAL (SELECT * FROM receipts x WHERE x.key = t.key AND x.iso_week = @week::text OFFSET 0) x
WHERE NOT EXISTS (SELECT 1 FROM claim c WHERE c.key = t.key);

-- name: ReadGoverning
-- Reads the governing receipt of week @week among candidate keys
-- @candidates (the first that has one), in the columns of Claim; @clock
-- the stand-in for the ledger's clock.
SELECT 0, false, r.key, r.state, r.fingerprint, r.attempts, r.claim_token,
    r.lease_expires_at, r.next_attempt_at, r.sent_at, r.provider_ref, r.maybe_sent, false,
    coalesce(@clock::timestamptz, now())
FROM unnest(@candidates::text[]) WITH ORDINALITY AS c(k, n)
CROSS JOIN LATERAL (SELECT * FROM receipts x WHERE x.key = c.k AND x.iso_week = @week::text OFFSET 0) r
ORDER BY c.n LIMIT 1;
