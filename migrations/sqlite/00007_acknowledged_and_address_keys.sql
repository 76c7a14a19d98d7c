-- SQLite edition of postgres/00008_acknowledged_and_address_keys.sql: the
-- state 'acknowledged' and the address_key of a failed receipt. SQLite
-- cannot change a CHECK constraint in place, so receipts is rebuilt with
-- the new one (the documented way: a new table, the rows copied, the old
-- one dropped, the new one renamed, its indexes made again), inside the
-- migration's transaction. It copies the whole table once: run it when no
-- run is under way.

-- +goose Up
CREATE TABLE receipts_new (
    key                  TEXT    PRIMARY KEY,
    key_id               TEXT    NOT NULL,
    state                TEXT    NOT NULL
        CHECK (state IN ('claimed', 'sent', 'retryable', 'failed', 'held', 'quarantined', 'acknowledged')),
    previous_state       TEXT,
    fingerprint          TEXT    NOT NULL,
    conflict_fingerprint TEXT,
    attempts             INTEGER NOT NULL,
    claim_token          INTEGER NOT NULL,
    lease_expires_at     INTEGER,
    send_started         INTEGER NOT NULL DEFAULT 0,
    send_started_at      INTEGER,
    maybe_sent           INTEGER NOT NULL DEFAULT 0,
    next_attempt_at      INTEGER,
    first_claimed_at     INTEGER NOT NULL,
    last_attempt_at      INTEGER NOT NULL,
    sent_at              INTEGER,
    provider_ref         TEXT,
    last_error           TEXT,
    run_id               TEXT    NOT NULL,
    iso_week             TEXT    NOT NULL,
    updated_at           INTEGER NOT NULL,
    first_run_id         TEXT,
    address_key          TEXT
) WITHOUT ROWID;
INSERT INTO receipts_new (key, key_id, state, previous_state, fingerprint, conflict_fingerprint, attempts,
    claim_token, lease_expires_at, send_started, send_started_at, maybe_sent, next_attempt_at,
    first_claimed_at, last_attempt_at, sent_at, provider_ref, last_error, run_id, iso_week, updated_at, first_run_id)
SELECT key, key_id, state, previous_state, fingerprint, conflict_fingerprint, attempts,
    claim_token, lease_expires_at, send_started, send_started_at, maybe_sent, next_attempt_at,
    first_claimed_at, last_attempt_at, sent_at, provider_ref, last_error, run_id, iso_week, updated_at, first_run_id
FROM receipts;
DROP TABLE receipts;
ALTER TABLE receipts_new RENAME TO receipts;
CREATE INDEX receipts_week_state ON receipts (iso_week, state);
CREATE INDEX receipts_attention ON receipts (state, key) WHERE state NOT IN ('claimed', 'sent');

-- +goose Down
-- An acknowledged receipt goes back to what it was acknowledged from
-- (held or quarantined: waiting for review again), with a history row.
INSERT INTO receipt_events (key, at, from_state, to_state, run_id, detail)
SELECT key, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER), 'acknowledged', previous_state, '',
    'acknowledgement undone by a schema downgrade'
FROM receipts WHERE state = 'acknowledged';
UPDATE receipts SET state = previous_state, previous_state = 'acknowledged' WHERE state = 'acknowledged';
CREATE TABLE receipts_old (
    key                  TEXT    PRIMARY KEY,
    key_id               TEXT    NOT NULL,
    state                TEXT    NOT NULL
        CHECK (state IN ('claimed', 'sent', 'retryable', 'failed', 'held', 'quarantined')),
    previous_state       TEXT,
    fingerprint          TEXT    NOT NULL,
    conflict_fingerprint TEXT,
    attempts             INTEGER NOT NULL,
    claim_token          INTEGER NOT NULL,
    lease_expires_at     INTEGER,
    send_started         INTEGER NOT NULL DEFAULT 0,
    send_started_at      INTEGER,
    maybe_sent           INTEGER NOT NULL DEFAULT 0,
    next_attempt_at      INTEGER,
    first_claimed_at     INTEGER NOT NULL,
    last_attempt_at      INTEGER NOT NULL,
    sent_at              INTEGER,
    provider_ref         TEXT,
    last_error           TEXT,
    run_id               TEXT    NOT NULL,
    iso_week             TEXT    NOT NULL,
    updated_at           INTEGER NOT NULL,
    first_run_id         TEXT
) WITHOUT ROWID;
INSERT INTO receipts_old (key, key_id, state, previous_state, fingerprint, conflict_fingerprint, attempts,
    claim_token, lease_expires_at, send_started, send_started_at, maybe_sent, next_attempt_at,
    first_claimed_at, last_attempt_at, sent_at, provider_ref, last_error, run_id, iso_week, updated_at, first_run_id)
SELECT key, key_id, state, previous_state, fingerprint, conflict_fingerprint, attempts,
    claim_token, lease_expires_at, send_started, send_started_at, maybe_sent, next_attempt_at,
    first_claimed_at, last_attempt_at, sent_at, provider_ref, last_error, run_id, iso_week, updated_at, first_run_id
FROM receipts;
DROP TABLE receipts;
ALTER TABLE receipts_old RENAME TO receipts;
CREATE INDEX receipts_week_state ON receipts (iso_week, state);
CREATE INDEX receipts_attention ON receipts (state, key) WHERE state NOT IN ('claimed', 'sent');
