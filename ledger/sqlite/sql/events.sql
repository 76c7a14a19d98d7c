-- Provider events (see events.go): what mail providers reported through
-- their webhooks. Keys only; lists of keys are JSON arrays (json_each).

-- name: InsertProviderEvent
-- Stores event (?1 provider, ?2 id) unless stored before (a replay: no
-- row changed): kind ?3, key ?4, address key ?5 (NULL for none), detail
-- ?6, occurred ?7, counted ?8, received ?9.
INSERT INTO provider_events (provider, event_id, kind, key, address_key, detail, occurred_at, counted_at, received_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
ON CONFLICT (provider, event_id) DO NOTHING;

-- name: NoteReceipt
-- Writes detail ?3 at ?2 on the history of receipt ?1, if there is one,
-- as a row from its state to its state (a note, not a transition).
INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
SELECT key, ?2, state, state, '', ?3 FROM receipts WHERE key = ?1;

-- name: CountSoftBounce
-- Counts a soft bounce of address key ?1 in ISO week ?2 at ?3.
INSERT INTO soft_bounces (address_key, iso_week, bounces, last_at) VALUES (?1, ?2, 1, ?3)
ON CONFLICT (address_key, iso_week) DO UPDATE
SET bounces = soft_bounces.bounces + 1, last_at = max(soft_bounces.last_at, excluded.last_at);

-- name: SoftBounceWeeks
-- Which of weeks ?2 any of address keys ?1 soft-bounced in.
SELECT DISTINCT iso_week FROM soft_bounces
WHERE address_key IN (SELECT value FROM json_each(?1)) AND iso_week IN (SELECT value FROM json_each(?2));

-- name: KeyEvents
-- The events of key ?2 at provider ?1, oldest first.
SELECT provider, event_id, kind, coalesce(key, ''), coalesce(address_key, ''), detail, occurred_at, received_at
FROM provider_events WHERE key = ?2 AND provider = ?1
ORDER BY occurred_at, event_id;

-- name: ProviderWatermark
-- Provider ?1's newest counted time (NULL when it has no event) and the
-- operator's until (NULL when none).
SELECT (SELECT max(counted_at) FROM provider_events WHERE provider = ?1),
       (SELECT until_at FROM provider_watermarks WHERE provider = ?1);

-- name: SendTime
-- When receipt ?1's send last started, or its last attempt; no row when
-- there is no receipt.
SELECT coalesce(send_started_at, last_attempt_at) FROM receipts WHERE key = ?1;

-- name: AdvanceWatermark
-- Sets provider ?1's until to ?2 (by ?3, note ?4, at ?5) unless it is
-- already later.
INSERT INTO provider_watermarks (provider, until_at, set_by, note, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (provider) DO UPDATE
SET until_at = excluded.until_at, set_by = excluded.set_by, note = excluded.note, updated_at = excluded.updated_at
WHERE provider_watermarks.until_at < excluded.until_at;

-- name: WatermarkUntil
-- Provider ?1's until.
SELECT until_at FROM provider_watermarks WHERE provider = ?1;

-- name: Watermarks
-- Every provider with events or an operator's until: newest counted time,
-- until, event count.
SELECT p.provider, e.newest, w.until_at, coalesce(e.n, 0)
FROM (SELECT provider FROM provider_events UNION SELECT provider FROM provider_watermarks) p
LEFT JOIN (SELECT provider, max(counted_at) AS newest, count(*) AS n FROM provider_events GROUP BY provider) e ON e.provider = p.provider
LEFT JOIN provider_watermarks w ON w.provider = p.provider
ORDER BY p.provider;
