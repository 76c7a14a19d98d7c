-- Statements of "digest verify" (see verify.go): a week's keys in pages,
-- and the states of keys a provider holds.

-- name: WeekKeys
-- Keys of week ?1 in state ?2 after key ?3, at most ?4, by the primary key.
SELECT key FROM receipts
WHERE iso_week = ?1 AND state = ?2 AND key > ?3
ORDER BY key LIMIT ?4;

-- name: WeekStates
-- Key and state of those of the keys ?2 (a JSON array) that are receipts
-- of week ?1.
SELECT key, state FROM receipts
WHERE iso_week = ?1 AND key IN (SELECT value FROM json_each(?2));
