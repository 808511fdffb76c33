-- A2A push notifications (issue 33, docs/protocols.md "A2A"): a push config is a
-- subscription scoped to one task (its session and execution) whose deliveries carry A2A's
-- payload for the task instead of the webhook event ('a2a' rather than 'webhook').
ALTER TABLE subscriptions ADD COLUMN format TEXT NOT NULL DEFAULT 'webhook';
-- The task (execution) a push config follows; NULL: every turn of its scope.
ALTER TABLE subscriptions ADD COLUMN execution_id TEXT;
-- The name of the secret holding the A2A notification token (sent as
-- X-A2A-Notification-Token), never the value; NULL: no token.
ALTER TABLE subscriptions ADD COLUMN token_secret TEXT;
-- The server's URL the config was created through: links in the pushed task point there.
ALTER TABLE subscriptions ADD COLUMN origin TEXT;
