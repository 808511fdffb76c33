-- A fire the scheduler could not start (its deployment cannot be resolved, its prompt
-- does not render, the Host refused it) is a run too, with its reason (issue 35): it has
-- no session, turn or execution, and `refused_code` / `refused_detail` say why. SQLite
-- cannot drop a NOT NULL: the table is rebuilt.
CREATE TABLE schedule_fires_new (
    schedule_id    TEXT NOT NULL,
    fire_at        REAL NOT NULL,
    fired_at       REAL NOT NULL,
    session_id     TEXT,
    turn_id        TEXT,
    execution_id   TEXT,
    scheduler_id   TEXT NOT NULL,
    epoch          INTEGER NOT NULL,
    refused_code   TEXT,
    refused_detail TEXT,
    PRIMARY KEY (schedule_id, fire_at)
);
INSERT INTO schedule_fires_new (schedule_id, fire_at, fired_at, session_id, turn_id,
    execution_id, scheduler_id, epoch)
    SELECT schedule_id, fire_at, fired_at, session_id, turn_id, execution_id, scheduler_id,
    epoch FROM schedule_fires;
DROP TABLE schedule_fires;
ALTER TABLE schedule_fires_new RENAME TO schedule_fires;
