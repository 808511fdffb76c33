-- Execution facts: who runs what (executions, attempts), what to resume from
-- (checkpoints), which side effects may have happened (tool ledger), human input,
-- and artifact metadata.

CREATE TABLE executions (
    -- Creation order: a session's executions are claimed strictly in this order.
    pos              INTEGER PRIMARY KEY AUTOINCREMENT,
    execution_id     TEXT NOT NULL UNIQUE,
    session_id       TEXT NOT NULL,
    turn_id          TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('queued', 'running', 'waiting_input',
                         'completed', 'failed', 'cancelled', 'deadline_exceeded', 'revoked')),
    created_at       REAL NOT NULL,
    principal_id     TEXT,
    trigger          TEXT,
    input            TEXT,
    retry_of         TEXT,
    snapshot_digest  TEXT,
    deadline_at      REAL,
    owner            TEXT,
    epoch            INTEGER NOT NULL DEFAULT 0,
    attempt          INTEGER NOT NULL DEFAULT 0,
    lease_expires_at REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    result           TEXT,
    error            TEXT,
    finished_at      REAL
);
CREATE INDEX executions_active ON executions (status, pos)
    WHERE status IN ('queued', 'running', 'waiting_input');
CREATE INDEX executions_by_session ON executions (session_id, pos);

CREATE TABLE attempts (
    attempt_id    TEXT PRIMARY KEY,
    execution_id  TEXT NOT NULL,
    attempt       INTEGER NOT NULL,
    epoch         INTEGER NOT NULL,
    supervisor_id TEXT NOT NULL,
    claimed_at    REAL NOT NULL,
    UNIQUE (execution_id, attempt)
);

CREATE TABLE checkpoint_steps (
    execution_id TEXT NOT NULL,
    step_no      INTEGER NOT NULL,
    payload      BLOB NOT NULL,
    PRIMARY KEY (execution_id, step_no)
);

CREATE TABLE checkpoints (
    execution_id TEXT NOT NULL,
    step_no      INTEGER NOT NULL,
    payload      BLOB NOT NULL,
    PRIMARY KEY (execution_id, step_no)
);

CREATE TABLE tool_ledger (
    execution_id    TEXT NOT NULL,
    tool_call_id    TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('started', 'completed', 'unknown')),
    idempotency_key TEXT,
    result          TEXT,
    updated_at      REAL,
    PRIMARY KEY (execution_id, tool_call_id)
);

CREATE TABLE input_requests (
    request_id            TEXT PRIMARY KEY,
    session_id            TEXT NOT NULL,
    execution_id          TEXT NOT NULL,
    turn_id               TEXT NOT NULL,
    tool_call_id          TEXT,
    status                TEXT NOT NULL CHECK (status IN ('open', 'resolved', 'expired', 'cancelled')),
    payload               TEXT NOT NULL,
    resolution            TEXT,
    answered_by_principal TEXT,
    answered_by_client    TEXT,
    expires_at            REAL,
    created_at            REAL NOT NULL,
    resolved_at           REAL
);
CREATE INDEX input_requests_by_session ON input_requests (session_id, created_at);
CREATE INDEX input_requests_by_execution ON input_requests (execution_id);

CREATE TABLE artifacts (
    artifact_id  TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL,
    name         TEXT NOT NULL,
    media_type   TEXT NOT NULL,
    size         INTEGER NOT NULL,
    sha256       TEXT NOT NULL,
    created_at   REAL NOT NULL,
    turn_id      TEXT,
    tool_call_id TEXT
);
CREATE INDEX artifacts_by_session ON artifacts (session_id, created_at);
