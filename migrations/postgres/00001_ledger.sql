-- The receipt ledger. Keys are HMACs ("KID:HEX"); no table holds a customer
-- identifier, address or name.

-- +goose Up
-- Fencing tokens: a new one for every claim, never reused.
CREATE SEQUENCE receipt_claim_token;

CREATE TABLE receipts (
    key                  text        PRIMARY KEY,
    key_id               text        NOT NULL,
    state                text        NOT NULL
        CHECK (state IN ('claimed', 'sent', 'retryable', 'failed', 'held', 'quarantined')),
    previous_state       text,       -- state before the last transition; NULL after the insert
    fingerprint          text        NOT NULL,
    conflict_fingerprint text,       -- the differing fingerprint that quarantined the row
    attempts             integer     NOT NULL,
    claim_token          bigint      NOT NULL,
    lease_expires_at     timestamptz,
    send_started         boolean     NOT NULL DEFAULT false,
    send_started_at      timestamptz,
    maybe_sent           boolean     NOT NULL DEFAULT false,
    next_attempt_at      timestamptz,
    first_claimed_at     timestamptz NOT NULL,
    last_attempt_at      timestamptz NOT NULL,
    sent_at              timestamptz,
    provider_ref         text,
    last_error           text,
    run_id               text        NOT NULL,
    iso_week             text        NOT NULL,
    updated_at           timestamptz NOT NULL
);
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
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key        text        NOT NULL,
    at         timestamptz NOT NULL,
    from_state text,       -- NULL: the receipt did not exist
    to_state   text        NOT NULL,
    run_id     text        NOT NULL DEFAULT '',
    detail     text        NOT NULL DEFAULT ''
);
-- On key alone: a receipt's few events (ordered by id when read) share one
-- entry of a deduplicated B-tree in PostgreSQL instead of one each; in
-- SQLite the rowid (id) is part of every index entry anyway.
CREATE INDEX receipt_events_key ON receipt_events (key);

CREATE TABLE snapshot_pins (
    digest_type text        NOT NULL,
    iso_week    text        NOT NULL,
    version     text        NOT NULL,
    as_of       timestamptz NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (digest_type, iso_week, version)
);

CREATE TABLE observations (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key         text        NOT NULL,
    fingerprint text        NOT NULL,
    run_id      text        NOT NULL,
    iso_week    text        NOT NULL,
    at          timestamptz NOT NULL
);
CREATE INDEX observations_key_at ON observations (key, at);
CREATE INDEX observations_at ON observations (at);

-- +goose Down
DROP TABLE observations;
DROP TABLE snapshot_pins;
DROP TABLE receipt_events;
DROP TABLE receipts;
DROP SEQUENCE receipt_claim_token;
