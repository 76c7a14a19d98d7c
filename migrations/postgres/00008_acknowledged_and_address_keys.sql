-- Issue 19. Two additions to receipts:
--
-- The state 'acknowledged': a receipt an operator closed with a recorded
-- reason ("digest review acknowledge"), typically one quarantined after it
-- was sent. Final and settled; no claim changes it (see ledger's state
-- diagram). The state CHECK is replaced by one that also allows it; the
-- new CHECK is validated over every partition once, under the ALTER's
-- lock (no existing row can fail it: it allows more). An older binary on
-- this schema never claims or sends an acknowledged receipt; one of its
-- claims with yet another fingerprint quarantines it again (back to
-- review): it fails safe.
--
-- address_key: the recipient's address key (an HMAC of the address under
-- the keyring's current key, as the run's logs print it; never the
-- address) of a receipt that failed permanently, so that a bounce becomes
-- a suppression without re-deriving it (docs/operations.md). NULL on every
-- other receipt and on those that failed before this migration.

-- +goose Up
ALTER TABLE receipts DROP CONSTRAINT receipts_state_check;
ALTER TABLE receipts ADD CONSTRAINT receipts_state_check
    CHECK (state IN ('claimed', 'sent', 'retryable', 'failed', 'held', 'quarantined', 'acknowledged'));
ALTER TABLE receipts ADD COLUMN address_key text;

-- +goose Down
-- An acknowledged receipt goes back to what it was acknowledged from
-- (held or quarantined: waiting for review again), with a history row.
INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
SELECT key, now(), 'acknowledged', previous_state, '', 'acknowledgement undone by a schema downgrade'
FROM receipts WHERE state = 'acknowledged';
UPDATE receipts SET state = previous_state, previous_state = 'acknowledged' WHERE state = 'acknowledged';
ALTER TABLE receipts DROP COLUMN address_key;
ALTER TABLE receipts DROP CONSTRAINT receipts_state_check;
ALTER TABLE receipts ADD CONSTRAINT receipts_state_check
    CHECK (state IN ('claimed', 'sent', 'retryable', 'failed', 'held', 'quarantined'));
