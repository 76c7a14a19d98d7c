-- Durability settings (see durability.go).

-- name: Durability
-- What decides whether a committed receipt survives a server crash, as
-- this session sees it.
SELECT current_setting('fsync'), current_setting('full_page_writes'), current_setting('synchronous_commit');
