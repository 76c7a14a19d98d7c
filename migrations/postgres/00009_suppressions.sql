-- The suppression list (issue 20): customers and addresses that get no
-- digest whatever the source says, recorded by the one-click unsubscribe
-- endpoint ("digest serve"), by operators ("digest suppression add") and
-- later by provider webhooks. Only keys are stored: "KID:HEX", the HMAC of
-- "customer|ID" or of "address|lowercase address" under the HMAC keyring's
-- secret KID, never an id or address in clear. One row per suppressed
-- key; every add and removal leaves a row in suppression_events.

-- +goose Up
CREATE TABLE suppressions (
    key        text        PRIMARY KEY,
    subject    text        NOT NULL CHECK (subject IN ('customer', 'address')),
    reason     text        NOT NULL, -- unsubscribe, hard_bounce, complaint, operator (checked by the binary, so a new reason needs no migration)
    source     text        NOT NULL, -- one-click, operator, a provider's name
    created_by text        NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL
);

CREATE TABLE suppression_events (
    id      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key     text        NOT NULL,
    subject text        NOT NULL,
    action  text        NOT NULL CHECK (action IN ('add', 'remove')),
    reason  text        NOT NULL,
    source  text        NOT NULL,
    by      text        NOT NULL DEFAULT '',
    note    text        NOT NULL DEFAULT '', -- a removal's reason
    at      timestamptz NOT NULL
);
CREATE INDEX suppression_events_key ON suppression_events (key, id);

-- +goose Down
DROP TABLE suppression_events;
DROP TABLE suppressions;
