-- SQLite only: the tool ledger is stored in its primary key.
--
-- As a rowid table with a TEXT primary key it kept every row twice: in the table and in
-- a separate autoindex on (execution_id, tool_call_id). Every tool call writes its entry
-- twice (started, completed), so each of those COMMITs dirtied one more page than it
-- needed to (a WAL frame and part of an fsync), and the index cost ~80 bytes a call.
-- A WITHOUT ROWID table is that index. (checkpoint_steps stays a rowid table: its rows
-- are step records of up to several KiB, which a WITHOUT ROWID b-tree would spill to
-- overflow pages past ~1 KiB.)
--
-- From this version on, action bodies may also be compressed BLOBs (store/_bodies.py):
-- an older opennua refuses this database (SchemaTooNew) instead of misreading them.

CREATE TABLE tool_ledger_v5 (
    execution_id    TEXT NOT NULL,
    tool_call_id    TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('started', 'completed', 'unknown')),
    idempotency_key TEXT,
    result          TEXT,
    updated_at      REAL,
    PRIMARY KEY (execution_id, tool_call_id)
) WITHOUT ROWID;
INSERT INTO tool_ledger_v5
    SELECT execution_id, tool_call_id, status, idempotency_key, result, updated_at
    FROM tool_ledger;
DROP TABLE tool_ledger;
ALTER TABLE tool_ledger_v5 RENAME TO tool_ledger;
