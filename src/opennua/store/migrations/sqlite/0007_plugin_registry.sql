-- The plugin registry (docs/plugins.md, "Registry"): published versions, the history of
-- every channel move, and deployments. A version row is written once and never updated:
-- its files are content-addressed blobs listed in `files`, so two versions share every
-- unchanged file. A channel's target is derived from its moves (nothing is overwritten, so
-- the history is the source of truth). A deployment name points at its newest validated
-- configuration; every configuration stays readable by its digest, because sessions keep
-- the digest they were created with.
CREATE TABLE plugin_versions (
    name         TEXT NOT NULL,
    version      TEXT NOT NULL,
    digest       TEXT NOT NULL,
    description  TEXT NOT NULL,
    files        TEXT NOT NULL,
    published_at REAL NOT NULL,
    PRIMARY KEY (name, version)
);
CREATE TABLE channel_moves (
    name     TEXT NOT NULL,
    channel  TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    version  TEXT NOT NULL,
    kind     TEXT NOT NULL CHECK (kind IN ('release', 'rollback')),
    moved_at REAL NOT NULL,
    PRIMARY KEY (name, channel, seq),
    FOREIGN KEY (name, version) REFERENCES plugin_versions (name, version)
);
CREATE TABLE deployment_configs (
    digest     TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    spec       TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE deployments (
    name       TEXT PRIMARY KEY,
    digest     TEXT NOT NULL REFERENCES deployment_configs (digest),
    updated_at REAL NOT NULL
);
-- A session's execution snapshot, beside the plugin and deployment digests it already
-- had: what lists show (name@version) and filter on (deployment) without reading the log.
ALTER TABLE sessions ADD COLUMN plugin TEXT;
ALTER TABLE sessions ADD COLUMN deployment TEXT;
ALTER TABLE sessions ADD COLUMN model TEXT;
ALTER TABLE sessions ADD COLUMN snapshot_digest TEXT;
CREATE INDEX sessions_by_deployment ON sessions (deployment, created_at DESC, session_id DESC);
