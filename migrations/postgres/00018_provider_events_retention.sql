-- Retention of what the providers reported (issue 35): "digest prune"
-- deletes provider events received before a horizon
-- (DIGEST_EVENTS_RETENTION) and soft-bounce counts whose last bounce is
-- before another (DIGEST_SOFT_BOUNCE_RETENTION), and "digest status" shows
-- the oldest of each. These indexes find both without reading the tables.

-- +goose Up
CREATE INDEX provider_events_received ON provider_events (received_at);
CREATE INDEX soft_bounces_last_at ON soft_bounces (last_at);

-- +goose Down
DROP INDEX soft_bounces_last_at;
DROP INDEX provider_events_received;
