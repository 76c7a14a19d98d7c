-- SQLite edition of postgres/00010_provider_events.sql: provider events,
-- operators' watermarks and soft-bounce streaks, keys only. Times are
-- microseconds since the epoch, as elsewhere in this schema.

-- +goose Up
CREATE TABLE provider_events (
    provider    TEXT    NOT NULL,
    event_id    TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    key         TEXT,
    address_key TEXT,
    detail      TEXT    NOT NULL DEFAULT '',
    occurred_at INTEGER NOT NULL,
    counted_at  INTEGER NOT NULL,
    received_at INTEGER NOT NULL,
    PRIMARY KEY (provider, event_id)
) WITHOUT ROWID;
CREATE INDEX provider_events_key ON provider_events (key) WHERE key IS NOT NULL;
CREATE INDEX provider_events_counted ON provider_events (provider, counted_at);

CREATE TABLE provider_watermarks (
    provider   TEXT    PRIMARY KEY,
    until_at   INTEGER NOT NULL,
    set_by     TEXT    NOT NULL,
    note       TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE soft_bounces (
    address_key TEXT    NOT NULL,
    iso_week    TEXT    NOT NULL,
    bounces     INTEGER NOT NULL,
    last_at     INTEGER NOT NULL,
    PRIMARY KEY (address_key, iso_week)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE soft_bounces;
DROP TABLE provider_watermarks;
DROP TABLE provider_events;
