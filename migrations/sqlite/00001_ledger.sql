-- The receipt ledger, SQLite edition of postgres/00001_ledger.sql. Times are
-- INTEGER microseconds since the Unix epoch (UTC); booleans are 0 or 1.

-- +goose Up
-- Fencing tokens: a new one for every claim, never reused.
CREATE TABLE ledger_counters (
    name  TEXT    PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO ledger_counters (name, value) VALUES ('claim_token', 0);

CREATE TABLE receipts (
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
    updated_at           INTEGER NOT NULL
) WITHOUT ROWID;
-- Few indexes: every claim and finish maintains each of them. Counts and
-- lists by week use the first; the partial one finds, in key order, what
-- waits for someone (retryable, failed, held, quarantined) without indexing
-- the sent majority or the claims in flight, so a claim and its finish to
-- sent add nothing to it, and claims and finishes, which match state
-- 'claimed', can only probe by key. Neither index holds updated_at or
-- send_started: marking a send started changes no indexed column (a HOT
-- update in PostgreSQL). Prune scans, rarely.
CREATE INDEX receipts_week_state ON receipts (iso_week, state);
CREATE INDEX receipts_attention ON receipts (state, key) WHERE state NOT IN ('claimed', 'sent');

CREATE TABLE receipt_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    key        TEXT    NOT NULL,
    at         INTEGER NOT NULL,
    from_state TEXT,
    to_state   TEXT    NOT NULL,
    run_id     TEXT    NOT NULL DEFAULT '',
    detail     TEXT    NOT NULL DEFAULT ''
);
-- On key alone: a receipt's few events (ordered by id when read) share one
-- entry of a deduplicated B-tree in PostgreSQL instead of one each; in
-- SQLite the rowid (id) is part of every index entry anyway.
CREATE INDEX receipt_events_key ON receipt_events (key);

CREATE TABLE snapshot_pins (
    digest_type TEXT    NOT NULL,
    iso_week    TEXT    NOT NULL,
    version     TEXT    NOT NULL,
    as_of       INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (digest_type, iso_week, version)
) WITHOUT ROWID;

CREATE TABLE observations (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    key         TEXT    NOT NULL,
    fingerprint TEXT    NOT NULL,
    run_id      TEXT    NOT NULL,
    iso_week    TEXT    NOT NULL,
    at          INTEGER NOT NULL
);
CREATE INDEX observations_key_at ON observations (key, at);
CREATE INDEX observations_at ON observations (at);

-- +goose Down
DROP TABLE observations;
DROP TABLE snapshot_pins;
DROP TABLE receipt_events;
DROP TABLE receipts;
DROP TABLE ledger_counters;
