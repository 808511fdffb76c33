-- Checkpoint records name their execution by its integer key (executions.pos), not its
-- ~30-byte text id, as the ledger has since migration 25: a side-effecting step writes a
-- step record of its own, and the id took ~45 of the ~400 bytes a record cost in the heap
-- and its key (`benchmarks/peers.py`: 1,531 -> 1,486 bytes a side-effecting step). The
-- `checkpoint_steps` and `checkpoints` views keep the logical schema the reads and the
-- prune use (a delete through one lands in its table); nua_unit
-- (store/sql/postgres_functions.sql) writes the tables.
--
-- The version also marks the nua_unit that writes these tables (and takes a ledger op
-- 'ran': a call started and completed in one unit): an older opennua refuses the database
-- instead of installing one that inserts into the views.

CREATE TABLE step_records (
    pos     BIGINT NOT NULL,
    step_no BIGINT NOT NULL,
    payload BYTEA NOT NULL,
    PRIMARY KEY (pos, step_no)
);
INSERT INTO step_records (pos, step_no, payload)
    SELECT e.pos, c.step_no, c.payload
    FROM checkpoint_steps c JOIN executions e ON e.execution_id = c.execution_id
    ORDER BY e.pos, c.step_no;
DROP TABLE checkpoint_steps;

CREATE TABLE full_records (
    pos     BIGINT NOT NULL,
    step_no BIGINT NOT NULL,
    payload BYTEA NOT NULL,
    PRIMARY KEY (pos, step_no)
);
INSERT INTO full_records (pos, step_no, payload)
    SELECT e.pos, c.step_no, c.payload
    FROM checkpoints c JOIN executions e ON e.execution_id = c.execution_id
    ORDER BY e.pos, c.step_no;
DROP TABLE checkpoints;

CREATE VIEW checkpoint_steps (execution_id, step_no, payload) AS
    SELECT e.execution_id, r.step_no, r.payload
    FROM step_records r JOIN executions e ON e.pos = r.pos;
CREATE VIEW checkpoints (execution_id, step_no, payload) AS
    SELECT e.execution_id, r.step_no, r.payload
    FROM full_records r JOIN executions e ON e.pos = r.pos;

-- Not named nua_*: postgres_functions.sql drops and recreates those, and these belong to
-- the views. A prune (the only delete) runs when a full checkpoint is written, rarely.
CREATE FUNCTION checkpoint_steps_view_delete() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    DELETE FROM step_records
    WHERE pos = (SELECT pos FROM executions WHERE execution_id = OLD.execution_id)
      AND step_no = OLD.step_no;
    RETURN OLD;
END
$fn$;
CREATE TRIGGER checkpoint_steps_delete INSTEAD OF DELETE ON checkpoint_steps
    FOR EACH ROW EXECUTE FUNCTION checkpoint_steps_view_delete();

CREATE FUNCTION checkpoints_view_delete() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    DELETE FROM full_records
    WHERE pos = (SELECT pos FROM executions WHERE execution_id = OLD.execution_id)
      AND step_no = OLD.step_no;
    RETURN OLD;
END
$fn$;
CREATE TRIGGER checkpoints_delete INSTEAD OF DELETE ON checkpoints
    FOR EACH ROW EXECUTE FUNCTION checkpoints_view_delete();
