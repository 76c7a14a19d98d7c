-- SQLite edition of postgres/00018_provider_events_retention.sql: the
-- indexes by which "digest prune" finds the provider events and
-- soft-bounce counts past their horizons, and "digest status" the oldest.

-- +goose Up
CREATE INDEX provider_events_received ON provider_events (received_at);
CREATE INDEX soft_bounces_last_at ON soft_bounces (last_at);

-- +goose Down
DROP INDEX soft_bounces_last_at;
DROP INDEX provider_events_received;
