-- The suppression list (see suppression.go). Keys only: "KID:HEX" HMACs of
-- a customer id or an address. Lists of keys are JSON arrays (json_each).

-- name: AnySuppressed
-- Whether one of the candidate keys ?1 is suppressed.
SELECT EXISTS (SELECT 1 FROM suppressions WHERE key IN (SELECT value FROM json_each(?1)));

-- name: InsertSuppression
-- Key ?1, subject ?2, reason ?3, source ?4, by ?5, at ?6.
INSERT INTO suppressions (key, subject, reason, source, created_by, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (key) DO NOTHING;

-- name: InsertSuppressionEvent
-- Key ?1, subject ?2, action ?3, reason ?4, source ?5, by ?6, note ?7, at ?8.
INSERT INTO suppression_events (key, subject, action, reason, source, by, note, at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8);

-- name: DeleteSuppressions
-- Removes the suppressions under any of keys ?1, returning what went.
DELETE FROM suppressions WHERE key IN (SELECT value FROM json_each(?1))
RETURNING key, subject, reason, source;

-- name: Suppressed
-- Which of keys ?1 are suppressed.
SELECT key FROM suppressions WHERE key IN (SELECT value FROM json_each(?1));

-- name: ListSuppressions
-- Suppressions under keys ?1 (all when the array is empty) after key ?2,
-- at most ?3.
SELECT key, subject, reason, source, created_by, created_at FROM suppressions
WHERE (json_array_length(?1) = 0 OR key IN (SELECT value FROM json_each(?1))) AND key > ?2
ORDER BY key LIMIT ?3;

-- name: SuppressionHistory
-- The adds and removals of keys ?1 (all when empty), oldest first, at most ?2.
SELECT id, key, subject, action, reason, source, by, note, at FROM suppression_events
WHERE json_array_length(?1) = 0 OR key IN (SELECT value FROM json_each(?1))
ORDER BY id LIMIT ?2;
