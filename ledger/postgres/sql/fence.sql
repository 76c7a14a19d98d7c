-- The fenced statements (see finish.go): they change a receipt only while
-- it is still claimed under the caller's token. Each takes arrays, one
-- element per fence (a single fence is a set of one), and is for the
-- fences of one week, @week: the week as a constant reaches one partition
-- of receipts. Each takes @clock, a stand-in for the ledger's clock, NULL
-- but in tests: every time they stamp or add a duration to is the
-- server's now() (see ledger.CallTimes).

-- name: Start
-- Marks claims' sends as started: @keys, @tokens; @replaced, the history
-- text of an earlier start it replaces (ledger.HistorySendStarted).
-- Returns the 1-based positions that matched.
WITH f AS MATERIALIZED (
    SELECT f.*, 'claimed'::text AS claimed FROM unnest(@keys::text[], @tokens::bigint[]) WITH ORDINALITY AS f(key, token, idx)
), s AS (
    UPDATE receipts r SET send_started = true, send_started_at = coalesce(@clock::timestamptz, now()), updated_at = coalesce(@clock::timestamptz, now())
    FROM f JOIN receipts o ON o.key = f.key AND o.iso_week = @week::text
    WHERE r.key = ANY(@keys::text[]) AND r.iso_week = @week::text AND r.key = f.key AND r.key = o.key AND r.claim_token = f.token AND r.state = f.claimed
    RETURNING f.idx, r.key, o.send_started_at AS earlier
), event AS (
    -- No row for this start: the receipt's send_started_at tells it
    -- (ledger.ReceiptStory). An earlier start it replaces (a claim taken
    -- over or claimed again after its send started) gets its row here,
    -- at its own time; that claim's run id is no longer stored.
    INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
    SELECT key, earlier, 'claimed', 'claimed', '', @replaced::text FROM s WHERE earlier IS NOT NULL
)
SELECT idx FROM s;

-- name: StartFresh
-- Start for the claims whose receipt has no earlier start (the happy path):
-- the same fence, the same columns set, no read of the earlier start and
-- no history; a fence whose receipt had a start is not matched here, and
-- Start takes it (StartSending). @keys, @tokens; returns the 1-based
-- positions that matched.
WITH f AS MATERIALIZED (
    SELECT f.*, 'claimed'::text AS claimed FROM unnest(@keys::text[], @tokens::bigint[]) WITH ORDINALITY AS f(key, token, idx)
)
UPDATE receipts r SET send_started = true, send_started_at = coalesce(@clock::timestamptz, now()), updated_at = coalesce(@clock::timestamptz, now())
FROM f
WHERE r.key = ANY(@keys::text[]) AND r.iso_week = @week::text AND r.key = f.key AND r.claim_token = f.token AND r.state = f.claimed
    AND r.send_started_at IS NULL
RETURNING f.idx;

-- name: Renew
-- Extends the leases of claims still held: @keys, @tokens; @lease in
-- microseconds (the new expiry is that long after now()). Returns
-- (position, renewed) per fence it saw; see Renew.
WITH f AS MATERIALIZED (
    SELECT f.*, 'claimed'::text AS claimed FROM unnest(@keys::text[], @tokens::bigint[]) WITH ORDINALITY AS f(key, token, idx)
), l AS MATERIALIZED (
    SELECT r.key FROM receipts r WHERE r.key = ANY(@keys::text[]) AND r.iso_week = @week::text FOR UPDATE SKIP LOCKED
), u AS (
    UPDATE receipts r SET lease_expires_at = coalesce(@clock::timestamptz, now()) + @lease::bigint * interval '1 microsecond',
        updated_at = coalesce(@clock::timestamptz, now())
    FROM f
    WHERE r.key = ANY(@keys::text[]) AND r.iso_week = @week::text AND r.key = f.key AND r.claim_token = f.token
        AND r.state = f.claimed AND r.key IN (SELECT key FROM l)
    RETURNING f.idx
)
SELECT idx, true FROM u
UNION ALL
SELECT f.idx, false FROM f WHERE f.key NOT IN (SELECT key FROM l);

-- name: Finish
-- Ends claims, one row per Finish: @keys, @tokens, @states (the new ones),
-- @refs (provider refs), @nexts (next attempts as microseconds after
-- now(), retryable), @maybes (maybe sent, retryable), @reasons, @run_ids,
-- @details (history), @address_keys (stored on failed receipts; '' none).
-- Returns the positions that matched.
WITH f AS MATERIALIZED (
    SELECT f.*, 'claimed'::text AS claimed FROM unnest(@keys::text[], @tokens::bigint[], @states::text[], @refs::text[], @nexts::bigint[], @maybes::boolean[],
            @reasons::text[], @run_ids::text[], @details::text[], @address_keys::text[]) WITH ORDINALITY
        AS f(key, token, state, ref, next, maybe, reason, run_id, detail, address_key, idx)
), u AS (
    UPDATE receipts r SET
        previous_state = r.state,
        state = f.state,
        lease_expires_at = NULL,
        sent_at = CASE WHEN f.state = 'sent' THEN coalesce(@clock::timestamptz, now()) ELSE r.sent_at END,
        provider_ref = CASE WHEN f.state = 'sent' THEN f.ref ELSE r.provider_ref END,
        next_attempt_at = CASE WHEN f.state = 'retryable' THEN coalesce(@clock::timestamptz, now()) + f.next * interval '1 microsecond' END,
        maybe_sent = CASE WHEN f.state = 'retryable' THEN f.maybe ELSE r.maybe_sent OR r.send_started END,
        last_error = CASE WHEN f.state = 'sent' THEN r.last_error ELSE f.reason END,
        address_key = CASE WHEN f.state = 'failed' THEN nullif(f.address_key, '') ELSE r.address_key END,
        run_id = f.run_id,
        updated_at = coalesce(@clock::timestamptz, now())
    FROM f
    WHERE r.key = ANY(@keys::text[]) AND r.iso_week = @week::text AND r.key = f.key AND r.claim_token = f.token
        AND r.state = f.claimed
    RETURNING f.idx, r.key, r.previous_state, r.state, f.run_id, f.detail, f.reason
), event AS (
    INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
    SELECT key, coalesce(@clock::timestamptz, now()), previous_state, state, run_id, detail FROM u
    -- A finish to sent without a reason gets no row: sent_at and
    -- provider_ref tell it (rules.FinishWritesHistory, ReceiptStory).
    WHERE NOT (state = 'sent' AND reason = '')
)
SELECT idx FROM u;

-- name: Observe
-- Records one observation and reads, from the statement's snapshot (which
-- excludes the new row), the previous observation and the governing receipt.
-- $1 candidate keys, $2 fingerprint, $3 run id, $4 week, $5 the clock. It
-- returns the ledger's time last (ledger.CallTimes).
WITH prev AS (
    SELECT max(o.at) AS at FROM unnest($1::text[]) AS c(k)
    CROSS JOIN LATERAL (SELECT max(at) AS at FROM observations WHERE key = c.k OFFSET 0) o
), ins AS (
    INSERT INTO observations (key, fingerprint, run_id, iso_week, at)
    VALUES (($1::text[])[1], $2::text, $3::text, $4::text, coalesce($5::timestamptz, now()))
)
SELECT prev.at, r.key, r.state, r.fingerprint, r.lease_expires_at, r.next_attempt_at, r.sent_at,
    coalesce($5::timestamptz, now())
FROM prev LEFT JOIN LATERAL (
    SELECT x.* FROM unnest($1::text[]) WITH ORDINALITY AS c(k, n)
    CROSS JOIN LATERAL (SELECT * FROM receipts WHERE key = c.k AND iso_week = $4::text OFFSET 0) x
    ORDER BY c.n LIMIT 1
) r ON true;

-- name: ReceiptWeeks
-- The week of each receipt of keys $1, for fences that carry none: one
-- primary-key probe per key and partition.
SELECT key, iso_week FROM receipts WHERE key = ANY($1::text[]);

-- name: EndClaim
-- Ends the receipts of week $5 under the keys $2 (reason $3, run id $4,
-- element by element; the clock $1) that no run is finishing: a claim whose
-- lease has expired, or a retryable receipt. One whose send may have
-- started ends held, the rest failed (digest.ClaimEnder); each with a
-- history row. One statement per week: the week as a constant reaches one
-- partition of receipts when planned (an array of weeks, one per key,
-- was planned against every partition, probed each key in each, and cost
-- a run 3 ms of planning a call). With a cutoff $6 (a prune's; NULL for a
-- run's), it skips every receipt of a week a run started since the cutoff
-- (Store.EndStaleClaims).
WITH req AS (
    SELECT * FROM unnest($2::text[], $3::text[], $4::text[]) AS q(key, reason, run_id)
), u AS (
    UPDATE receipts r SET
        previous_state = r.state,
        state = CASE WHEN r.send_started OR r.maybe_sent THEN 'held' ELSE 'failed' END,
        maybe_sent = r.maybe_sent OR (r.state = 'claimed' AND r.send_started),
        lease_expires_at = NULL,
        next_attempt_at = NULL,
        last_error = req.reason,
        run_id = req.run_id,
        updated_at = coalesce($1::timestamptz, now())
    FROM req
    WHERE r.key = req.key AND r.iso_week = $5::text
        AND ((r.state = 'claimed' AND r.lease_expires_at <= coalesce($1::timestamptz, now())) OR r.state = 'retryable')
        AND ($6::timestamptz IS NULL
            OR NOT EXISTS (SELECT 1 FROM week_runs w WHERE w.iso_week = r.iso_week AND w.last_started_at >= $6))
    RETURNING r.key, r.previous_state, r.state, req.reason, req.run_id
), event AS (
    INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
    SELECT key, coalesce($1::timestamptz, now()), previous_state, state, run_id, reason FROM u
)
SELECT key, previous_state, state FROM u;
