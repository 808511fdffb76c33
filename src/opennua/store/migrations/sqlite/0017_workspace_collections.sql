-- A collection of a session's workspace blobs holds this lease while it runs (issue 35):
-- a claim of an execution of that session waits until it is released or expires, so a
-- new turn never restores a workspace whose blobs a collection has deleted and not yet
-- put back. Taken only while the session has no active execution.
CREATE TABLE workspace_collections (
    session_id TEXT PRIMARY KEY,
    collector  TEXT NOT NULL,
    expires_at REAL NOT NULL
);
