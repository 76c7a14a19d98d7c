-- SQLite edition of postgres/00009_suppressions.sql: the suppression list
-- and its history, keys only. Times are microseconds since the epoch, as
-- elsewhere in this schema.

-- +goose Up
CREATE TABLE suppressions (
    key        TEXT    PRIMARY KEY,
    subject    TEXT    NOT NULL CHECK (subject IN ('customer', 'address')),
    reason     TEXT    NOT NULL,
    source     TEXT    NOT NULL,
    created_by TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE suppression_events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    key     TEXT    NOT NULL,
    subject TEXT    NOT NULL,
    action  TEXT    NOT NULL CHECK (action IN ('add', 'remove')),
    reason  TEXT    NOT NULL,
    source  TEXT    NOT NULL,
    by      TEXT    NOT NULL DEFAULT '',
    note    TEXT    NOT NULL DEFAULT '',
    at      INTEGER NOT NULL
);
CREATE INDEX suppression_events_key ON suppression_events (key, id);

-- +goose Down
DROP TABLE suppression_events;
DROP TABLE suppressions;
