-- Who may do what (issue 15): workspaces own everything; principals (users and agent
-- principals) hold a role per workspace; API tokens are stored as a hash under a
-- non-secret id; every execution runs under a short-lived grant. Sessions and executions
-- from before this version have no workspace: the server adopts them into the default
-- workspace when it bootstraps (opennua.auth), where the old owner token becomes a token
-- of the default owner.

CREATE TABLE workspaces (
    workspace_id TEXT PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    created_at   REAL NOT NULL
);

CREATE TABLE principals (
    principal_id TEXT PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind IN ('user', 'agent')),
    name         TEXT NOT NULL,
    -- An agent principal's home workspace (where it was created); NULL for users.
    workspace_id TEXT,
    created_by   TEXT,
    created_at   REAL NOT NULL,
    disabled_at  REAL
);
CREATE UNIQUE INDEX principals_by_name ON principals (kind, name);

CREATE TABLE memberships (
    workspace_id TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    role         TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
    created_at   REAL NOT NULL,
    PRIMARY KEY (workspace_id, principal_id)
);
CREATE INDEX memberships_by_principal ON memberships (principal_id);

CREATE TABLE api_tokens (
    token_id     TEXT PRIMARY KEY,
    principal_id TEXT NOT NULL,
    -- sha256 of the secret, hex: the secret itself is shown once and never stored.
    secret_hash  TEXT NOT NULL,
    name         TEXT,
    created_at   REAL NOT NULL,
    expires_at   REAL,
    revoked_at   REAL
);
CREATE INDEX api_tokens_by_principal ON api_tokens (principal_id);

CREATE TABLE execution_grants (
    execution_id    TEXT PRIMARY KEY,
    principal_id    TEXT NOT NULL,
    workspace_id    TEXT NOT NULL,
    -- The token the grant was derived from, when a person's request started it.
    token_id        TEXT,
    snapshot_digest TEXT,
    model           TEXT,
    caps            TEXT,
    expires_at      REAL NOT NULL,
    revoked_at      REAL,
    revoked_reason  TEXT
);

CREATE INDEX sessions_by_workspace ON sessions (workspace_id, created_at DESC, session_id DESC);
