-- Automation (issue 19, docs/automation.md): schedules and webhooks start turns against a
-- deployment. A schedule's fires and a hook's deliveries are logs keyed by their slot and
-- their `webhook-id`: the primary key is what makes "one run per slot / per delivery" a
-- fact of the store, written in the same unit as the execution the fire started. One
-- scheduler runs at a time, under a lease fenced by its epoch like an execution's.
CREATE TABLE schedules (
    schedule_id  TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    name         TEXT NOT NULL,
    cron         TEXT NOT NULL,
    timezone     TEXT NOT NULL,
    deployment   TEXT NOT NULL,
    prompt       TEXT NOT NULL,
    -- A bound session every fire continues, or NULL: a new session per fire.
    session_id   TEXT,
    misfire      TEXT NOT NULL CHECK (misfire IN ('skip', 'run_once')),
    paused       INTEGER NOT NULL DEFAULT 0,
    -- The next slot not yet decided (fired or skipped); NULL when the cron has no more.
    next_fire_at DOUBLE PRECISION,
    created_by   TEXT NOT NULL,
    created_at   DOUBLE PRECISION NOT NULL,
    UNIQUE (workspace_id, name)
);
CREATE INDEX schedules_due ON schedules (paused, next_fire_at);

CREATE TABLE schedule_fires (
    schedule_id  TEXT NOT NULL,
    fire_at      DOUBLE PRECISION NOT NULL,
    fired_at     DOUBLE PRECISION NOT NULL,
    session_id   TEXT NOT NULL,
    turn_id      TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    scheduler_id TEXT NOT NULL,
    epoch        INTEGER NOT NULL,
    PRIMARY KEY (schedule_id, fire_at)
);

CREATE TABLE hooks (
    hook_id      TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    name         TEXT NOT NULL,
    deployment   TEXT NOT NULL,
    prompt       TEXT NOT NULL,
    -- The name of the signing secret in the workspace's secret store (never the value).
    secret_name  TEXT NOT NULL,
    max_bytes    INTEGER NOT NULL,
    created_by   TEXT NOT NULL,
    created_at   DOUBLE PRECISION NOT NULL,
    UNIQUE (workspace_id, name)
);

CREATE TABLE hook_deliveries (
    hook_id      TEXT NOT NULL,
    delivery_id  TEXT NOT NULL,
    -- sha256 of the body: the same webhook-id with another body is not a redelivery.
    body_sha256  TEXT NOT NULL,
    received_at  DOUBLE PRECISION NOT NULL,
    session_id   TEXT NOT NULL,
    turn_id      TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    PRIMARY KEY (hook_id, delivery_id)
);

CREATE TABLE scheduler_leases (
    name       TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    epoch      INTEGER NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
