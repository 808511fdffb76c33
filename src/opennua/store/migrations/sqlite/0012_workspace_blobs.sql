-- Blobs are global for storage, scoped for access (issue 29; docs/store.md "Blobs"): a
-- workspace names a blob by its sha256 only when it holds a reference to it. A row here
-- is such a reference, taken when the workspace uploads the bytes (`POST
-- /v1/plugin-files`); the sizes of a workspace's rows are what its storage quota counts
-- (each distinct blob once, however many versions list it).
CREATE TABLE workspace_blobs (
    workspace_id TEXT NOT NULL,
    sha256       TEXT NOT NULL,
    size         INTEGER NOT NULL,
    created_at   REAL NOT NULL,
    PRIMARY KEY (workspace_id, sha256)
);
CREATE INDEX workspace_blobs_by_sha ON workspace_blobs (sha256);
