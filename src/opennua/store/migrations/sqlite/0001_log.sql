-- Client-visible facts: sessions, their ordered action log, snapshots, idempotency.
-- JSON is stored as TEXT (byte-exact round trip); times are unix seconds (REAL).

CREATE TABLE sessions (
    session_id        TEXT PRIMARY KEY,
    created_at        REAL NOT NULL,
    workspace_id      TEXT,
    principal_id      TEXT,
    title             TEXT,
    plugin_digest     TEXT,
    deployment_digest TEXT,
    metadata          TEXT,
    -- The per-session sequence: the last seq handed out. Appends read and move it in
    -- the same transaction that inserts the actions.
    last_seq          INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sessions_newest ON sessions (created_at DESC, session_id DESC);

CREATE TABLE actions (
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    action_id  TEXT NOT NULL,
    type       TEXT NOT NULL,
    body       TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE UNIQUE INDEX actions_by_id ON actions (session_id, action_id);

CREATE TABLE snapshots (
    session_id TEXT PRIMARY KEY,
    seq        INTEGER NOT NULL,
    state      TEXT NOT NULL
);

CREATE TABLE idempotency (
    scope        TEXT NOT NULL,
    idem_key     TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('in_flight', 'completed')),
    response     TEXT,
    created_at   REAL NOT NULL,
    expires_at   REAL NOT NULL,
    PRIMARY KEY (scope, idem_key)
);
