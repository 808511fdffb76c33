-- Deliveries a hook refused (bad signature, too large, not JSON, …): what the console
-- shows beside the accepted ones. Only for hooks that exist; the newest 50 per hook are
-- kept (the write that adds one prunes the rest). Never the payload or a header's value
-- other than the `webhook-id` the sender claimed.
CREATE TABLE hook_refusals (
    hook_id     TEXT NOT NULL,
    refused_at  DOUBLE PRECISION NOT NULL,
    code        TEXT NOT NULL,
    -- The `webhook-id` as sent: unverified when the signature was the problem.
    delivery_id TEXT,
    body_bytes  INTEGER NOT NULL
);
CREATE INDEX hook_refusals_by_hook ON hook_refusals (hook_id, refused_at DESC);
