-- The tool ledger names its execution by the execution's integer key (executions.pos),
-- not its ~30-byte text id: a call's entry is written twice (started, then completed,
-- which leaves the started version behind until a vacuum), and each version and its key
-- held that text (~50 of the ~310 bytes a call's entry took, `benchmarks/peers.py`).
-- The `tool_ledger` view keeps the logical schema the reads and the store's updates use
-- (an update through it lands in `ledger`); nua_unit
-- (store/sql/postgres_functions.sql) writes `ledger`.
--
-- The version also marks the nua_unit that writes `ledger`: an older opennua refuses the
-- database instead of installing one that writes the view.

CREATE TABLE ledger (
    pos             BIGINT NOT NULL,
    tool_call_id    TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('started', 'completed', 'unknown')),
    idempotency_key TEXT,
    result          TEXT,
    updated_at      DOUBLE PRECISION,
    PRIMARY KEY (pos, tool_call_id)
);
INSERT INTO ledger (pos, tool_call_id, status, idempotency_key, result, updated_at)
    SELECT e.pos, l.tool_call_id, l.status, l.idempotency_key, l.result, l.updated_at
    FROM tool_ledger l JOIN executions e ON e.execution_id = l.execution_id;
DROP TABLE tool_ledger;

CREATE VIEW tool_ledger (execution_id, tool_call_id, status, idempotency_key, result,
                         updated_at) AS
    SELECT e.execution_id, l.tool_call_id, l.status, l.idempotency_key, l.result, l.updated_at
    FROM ledger l JOIN executions e ON e.pos = l.pos;

-- Not named nua_*: postgres_functions.sql drops and recreates those, and this one belongs
-- to the view.
CREATE FUNCTION tool_ledger_view_update() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    UPDATE ledger SET status = NEW.status, idempotency_key = NEW.idempotency_key,
        result = NEW.result, updated_at = NEW.updated_at
    WHERE pos = (SELECT pos FROM executions WHERE execution_id = OLD.execution_id)
      AND tool_call_id = OLD.tool_call_id;
    RETURN NEW;
END
$fn$;
CREATE TRIGGER tool_ledger_update INSTEAD OF UPDATE ON tool_ledger
    FOR EACH ROW EXECUTE FUNCTION tool_ledger_view_update();
