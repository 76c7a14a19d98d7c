-- Provider events (issue 20): what mail providers report through their
-- webhooks to "digest serve". Keys only: the digest key the message
-- carried and the recipient address's HMAC ("KID:HEX" of "address|" and
-- the lowercase address), never an address in clear.
--
-- provider_events: one row per event, unique per provider and the
-- provider's event id, so a replayed webhook is recognised and ignored.
-- counted_at is the event's time for the provider's watermark: when it
-- occurred, but never after it was received (a provider clock ahead cannot
-- push the watermark into the future). The events look-up reads a key's
-- events (provider_events_key) and the provider's newest counted_at
-- (provider_events_counted).
--
-- provider_watermarks: an operator's statement that a provider's events
-- are complete up to until_at ("digest events watermark"); only forward.
--
-- soft_bounces: how many soft bounces an address had in an ISO week
-- (UTC); an address that soft-bounces in DIGEST_SOFT_BOUNCE_WEEKS
-- consecutive weeks is suppressed.

-- +goose Up
CREATE TABLE provider_events (
    provider    text        NOT NULL,
    event_id    text        NOT NULL,
    kind        text        NOT NULL, -- accepted, delivered, hard_bounce, soft_bounce, complaint, unsubscribe (checked by the binary)
    key         text,                 -- the digest key; NULL when the event names none
    address_key text,                 -- the address's HMAC; NULL when the event names no address
    detail      text        NOT NULL DEFAULT '',
    occurred_at timestamptz NOT NULL, -- the provider's clock
    counted_at  timestamptz NOT NULL, -- least(occurred_at, received_at)
    received_at timestamptz NOT NULL, -- the ledger's clock
    PRIMARY KEY (provider, event_id)
);
CREATE INDEX provider_events_key ON provider_events (key) WHERE key IS NOT NULL;
CREATE INDEX provider_events_counted ON provider_events (provider, counted_at);

CREATE TABLE provider_watermarks (
    provider   text        PRIMARY KEY,
    until_at   timestamptz NOT NULL,
    set_by     text        NOT NULL,
    note       text        NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE soft_bounces (
    address_key text        NOT NULL,
    iso_week    text        NOT NULL,
    bounces     integer     NOT NULL,
    last_at     timestamptz NOT NULL,
    PRIMARY KEY (address_key, iso_week)
);

-- +goose Down
DROP TABLE soft_bounces;
DROP TABLE provider_watermarks;
DROP TABLE provider_events;
