-- Each action row named its session by its text id, ~31 bytes, three times over: in the
-- heap, in the primary key and in the id index (~95 of the ~340 bytes a stored action
-- took, `benchmarks/peers.py`). As on SQLite (its migration 4), a session gets an integer
-- key and action_log rows hold that; the `actions` view keeps the logical schema the
-- reads query, and nua_unit (store/sql/postgres_functions.sql) writes action_log.
--
-- The version also marks the nua_unit that writes action_log: an older opennua refuses
-- the database instead of installing one that inserts into the view.

ALTER TABLE sessions ADD COLUMN sk BIGINT GENERATED ALWAYS AS IDENTITY;
ALTER TABLE sessions ADD CONSTRAINT sessions_sk UNIQUE (sk);

CREATE TABLE action_log (
    sk        BIGINT NOT NULL,
    seq       BIGINT NOT NULL,
    action_id TEXT NOT NULL,
    type      TEXT NOT NULL,
    body      BYTEA NOT NULL,
    PRIMARY KEY (sk, seq)
);
INSERT INTO action_log (sk, seq, action_id, type, body)
    SELECT s.sk, a.seq, a.action_id, a.type, a.body
    FROM actions a JOIN sessions s ON s.session_id = a.session_id
    ORDER BY s.sk, a.seq;
DROP TABLE actions;
CREATE UNIQUE INDEX action_log_by_id ON action_log (sk, action_id);

CREATE VIEW actions (session_id, seq, action_id, type, body) AS
    SELECT s.session_id, a.seq, a.action_id, a.type, a.body
    FROM action_log a JOIN sessions s ON s.sk = a.sk;
