-- The secret store and the gateway's audit (issue 16; docs/secrets.md, docs/gateway.md).
-- A secret is a workspace's named value, sealed with AES-GCM by opennua.secrets before it
-- reaches the store: `sealed` is base64(nonce || ciphertext || tag), bound to (workspace,
-- name) as associated data, so a row copied under another name does not decrypt. The store
-- never sees a value. `secret_key_check` holds one value sealed under the current key: a
-- start with another key fails at once ("wrong key") instead of at the first tool call.
CREATE TABLE secrets (
    workspace_id TEXT NOT NULL,
    name         TEXT NOT NULL,
    sealed       TEXT NOT NULL,
    key_id       TEXT NOT NULL,
    created_at   DOUBLE PRECISION NOT NULL,
    updated_at   DOUBLE PRECISION NOT NULL,
    last_used_at DOUBLE PRECISION,
    PRIMARY KEY (workspace_id, name)
);

CREATE TABLE secret_key_check (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    key_id     TEXT NOT NULL,
    sealed     TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);

-- One row per call the gateway answered (allowed or refused): who, which execution, which
-- tool, which credential *name* (never its value), the outcome and its latency.
CREATE TABLE gateway_audit (
    audit_id     TEXT PRIMARY KEY,
    at           DOUBLE PRECISION NOT NULL,
    workspace_id TEXT,
    principal_id TEXT,
    execution_id TEXT,
    server       TEXT NOT NULL,
    tool         TEXT,
    host         TEXT,
    credential   TEXT,
    outcome      TEXT NOT NULL,
    code         TEXT,
    latency_ms   DOUBLE PRECISION NOT NULL
);
CREATE INDEX gateway_audit_by_workspace ON gateway_audit (workspace_id, at DESC);
CREATE INDEX gateway_audit_by_execution ON gateway_audit (execution_id, at);

-- The gateway ticket of an execution's current attempt: the supervisor draws a random
-- secret when it claims and keeps it in memory; the store keeps its sha256 with the
-- attempt's epoch. A ticket of an earlier attempt (another epoch) is refused.
CREATE TABLE gateway_tickets (
    execution_id TEXT PRIMARY KEY,
    epoch        INTEGER NOT NULL,
    secret_hash  TEXT NOT NULL,
    created_at   DOUBLE PRECISION NOT NULL
);
