-- The suppression list (see suppression.go). Keys only: "KID:HEX" HMACs of
-- a customer id or an address.

-- name: Suppress
-- Stores a suppression under $1[1] unless one of the candidate keys $1 is
-- suppressed already, and writes its history row in the same statement:
-- subject $2, reason $3, source $4, by $5, at $6. Two concurrent adds of
-- the same key both pass NOT EXISTS; the second's INSERT waits for the
-- first to commit and then does nothing (ON CONFLICT), so it writes no
-- history row either. Returns the history row's id when it added one.
WITH added AS (
    INSERT INTO suppressions (key, subject, reason, source, created_by, created_at)
    SELECT ($1::text[])[1], $2, $3, $4, $5, $6
    WHERE NOT EXISTS (SELECT 1 FROM suppressions WHERE key = ANY($1::text[]))
    ON CONFLICT (key) DO NOTHING
    RETURNING key
)
INSERT INTO suppression_events (key, subject, action, reason, source, by, at)
SELECT key, $2, 'add', $3, $4, $5, $6 FROM added
RETURNING id;

-- name: Unsuppress
-- Removes the suppressions under any of keys $1 and records each removal,
-- by $2 with note $3 at $4, keeping the removed row's reason and source.
WITH removed AS (
    DELETE FROM suppressions WHERE key = ANY($1::text[])
    RETURNING key, subject, reason, source
)
INSERT INTO suppression_events (key, subject, action, reason, source, by, note, at)
SELECT key, subject, 'remove', reason, source, $2, $3, $4 FROM removed
RETURNING id;

-- name: Suppressed
-- Which of keys $1 are suppressed: one index probe per key, one round trip.
SELECT key FROM suppressions WHERE key = ANY($1::text[]);

-- name: ListSuppressions
-- Suppressions under keys $1 (all when empty) after key $2, at most $3.
SELECT key, subject, reason, source, created_by, created_at FROM suppressions
WHERE (cardinality($1::text[]) = 0 OR key = ANY($1::text[])) AND key > $2
ORDER BY key LIMIT $3;

-- name: SuppressionHistory
-- The adds and removals of keys $1 (all when empty), oldest first, at most $2.
SELECT id, key, subject, action, reason, source, by, note, at FROM suppression_events
WHERE cardinality($1::text[]) = 0 OR key = ANY($1::text[])
ORDER BY id LIMIT $2;
