-- SQLite only: the action log is keyed by a small integer per session, not its text id.
--
-- With many sessions appending at once, every COMMIT dirties about one leaf page per
-- session of the (session, seq) index, and every dirty page is written to the WAL and
-- fsynced. Keyed by the ~30-character session_id, that index held ~40-byte entries in a
-- rowid table's separate autoindex; keyed by an INTEGER sk, entries are a few bytes, so
-- far fewer leaves and fewer pages per commit. Rows are stored in arrival order (pos),
-- so a commit's bodies fill a few pages at the table's right edge.
--
-- `sessions.sk` is an INTEGER PRIMARY KEY (the rowid), so VACUUM never renumbers it.
-- The `actions` view keeps the logical schema that the reads query; the writer's append
-- (store/_sqlite_ops.py) writes action_log.

CREATE TABLE sessions_v4 (
    sk                INTEGER PRIMARY KEY,
    session_id        TEXT NOT NULL UNIQUE,
    created_at        REAL NOT NULL,
    workspace_id      TEXT,
    principal_id      TEXT,
    title             TEXT,
    plugin_digest     TEXT,
    deployment_digest TEXT,
    metadata          TEXT,
    last_seq          INTEGER NOT NULL DEFAULT 0
);
INSERT INTO sessions_v4 (session_id, created_at, workspace_id, principal_id, title,
    plugin_digest, deployment_digest, metadata, last_seq)
    SELECT session_id, created_at, workspace_id, principal_id, title, plugin_digest,
        deployment_digest, metadata, last_seq
    FROM sessions ORDER BY rowid;
DROP TABLE sessions;
ALTER TABLE sessions_v4 RENAME TO sessions;
CREATE INDEX sessions_newest ON sessions (created_at DESC, session_id DESC);

CREATE TABLE action_log (
    pos       INTEGER PRIMARY KEY,
    sk        INTEGER NOT NULL,
    seq       INTEGER NOT NULL,
    action_id TEXT NOT NULL,
    type      TEXT NOT NULL,
    body      TEXT NOT NULL
);
INSERT INTO action_log (sk, seq, action_id, type, body)
    SELECT s.sk, a.seq, a.action_id, a.type, a.body
    FROM actions a JOIN sessions s ON s.session_id = a.session_id
    ORDER BY a.rowid;
DROP TABLE actions;
CREATE UNIQUE INDEX action_log_by_seq ON action_log (sk, seq);
-- Id first, as in migration 3: time-ordered ids land near the right edge.
CREATE UNIQUE INDEX action_log_by_id ON action_log (action_id, sk);

CREATE VIEW actions (session_id, seq, action_id, type, body) AS
    SELECT s.session_id, a.seq, a.action_id, a.type, a.body
    FROM action_log a JOIN sessions s ON s.sk = a.sk;
