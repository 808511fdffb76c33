-- Event subscriptions (issue 34, docs/subscriptions.md): committed actions of a
-- workspace's sessions, POSTed to a URL an admin configured, signed with Standard Webhooks.
-- Delivery state is kept apart from the turn's: a cursor per (subscription, session) of
-- the last seq scanned, advanced in the same unit that records the deliveries it found,
-- so after a restart nothing committed is skipped and nothing is recorded twice.
CREATE TABLE subscriptions (
    subscription_id TEXT PRIMARY KEY,
    workspace_id    TEXT NOT NULL,
    url             TEXT NOT NULL,
    -- JSON list of action types.
    events          TEXT NOT NULL,
    -- Narrowed to a deployment (by name) and/or a session; NULL: every one.
    deployment      TEXT,
    session_id      TEXT,
    -- The name of the signing secret in the workspace's secret store (never the value).
    secret_name     TEXT NOT NULL,
    created_by      TEXT NOT NULL,
    created_at      DOUBLE PRECISION NOT NULL,
    -- Set when a receiver answered 410 Gone: nothing more is delivered.
    disabled_at     DOUBLE PRECISION,
    disabled_reason TEXT
);
CREATE INDEX subscriptions_by_workspace ON subscriptions (workspace_id);

CREATE TABLE subscription_cursors (
    subscription_id TEXT NOT NULL,
    session_id      TEXT NOT NULL,
    seq             BIGINT NOT NULL,
    PRIMARY KEY (subscription_id, session_id)
);

CREATE TABLE subscription_deliveries (
    subscription_id TEXT NOT NULL,
    -- The webhook-id: derived from the action's id, the same on every retry and replay.
    event_id        TEXT NOT NULL,
    session_id      TEXT NOT NULL,
    seq             BIGINT NOT NULL,
    event_type      TEXT NOT NULL,
    payload         TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_at         DOUBLE PRECISION NOT NULL,
    last_status     INTEGER,
    last_error      TEXT,
    created_at      DOUBLE PRECISION NOT NULL,
    updated_at      DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (subscription_id, event_id)
);
CREATE INDEX subscription_deliveries_due ON subscription_deliveries (state, next_at);
CREATE INDEX subscription_deliveries_newest ON subscription_deliveries (subscription_id, created_at);
