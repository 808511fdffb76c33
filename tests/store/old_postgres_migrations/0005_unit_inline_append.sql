-- nua_unit with the single-session append inlined (it called nua_append_session per
-- append op: a nested SQL call that cost ~40 us of a ~300 us unit) and one pg_notify
-- for up to 100 moved sessions. Same contract as in 0003 (see there and docs/store.md).
-- nua_append_session has no other caller, so the PostgreSQL side keeps two definitions
-- of append: this per-row loop (a unit's few rows) and nua_append_rows (0004, batches).
CREATE OR REPLACE FUNCTION nua_unit(
    p_exec TEXT, p_fenced BOOLEAN, p_epoch BIGINT, p_owner TEXT,
    p_kind TEXT[], p_key TEXT[], p_text TEXT[], p_num DOUBLE PRECISION[], p_int BIGINT[],
    p_bin BYTEA[], p_count INT[],
    p_id TEXT[], p_type TEXT[], p_head TEXT[], p_tail TEXT[]
) RETURNS BIGINT[] LANGUAGE plpgsql AS $fn$
DECLARE
    v_epoch BIGINT;
    v_status TEXT;
    v_owner TEXT;
    v_out BIGINT[] := '{}';
    v_notes TEXT[] := '{}';
    v_at INT := 1;
    v_key TEXT;
    v_top BIGINT;
    v_first BIGINT;
    v_seq BIGINT;
BEGIN
    IF p_fenced THEN
        -- Locked: a concurrent claim skips the row and a heartbeat waits, so the epoch
        -- cannot move between this check and the commit.
        SELECT epoch, status, owner INTO v_epoch, v_status, v_owner
        FROM executions WHERE execution_id = p_exec FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'NUA02', MESSAGE = 'execution', DETAIL = p_exec;
        END IF;
        IF v_epoch <> p_epoch OR v_status <> 'running'
           OR (p_owner IS NOT NULL AND p_owner IS DISTINCT FROM v_owner) THEN
            RAISE EXCEPTION USING ERRCODE = 'NUA01', MESSAGE = 'fenced',
                DETAIL = v_epoch::text, HINT = v_status;
        END IF;
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_kind, 1), 0) LOOP
        v_key := p_key[i];
        CASE p_kind[i]
        WHEN 'append' THEN
            -- nua_append_session, inlined (a nested call per op costs more than it does).
            SELECT last_seq INTO v_top FROM sessions WHERE session_id = v_key FOR UPDATE;
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'NUA02', MESSAGE = 'session', DETAIL = v_key;
            END IF;
            v_first := v_top;
            FOR j IN v_at .. v_at + p_count[i] - 1 LOOP
                SELECT seq INTO v_seq FROM actions
                WHERE session_id = v_key AND action_id = p_id[j];
                IF NOT FOUND THEN
                    v_top := v_top + 1;
                    v_seq := v_top;
                    INSERT INTO actions (session_id, seq, action_id, type, body)
                    VALUES (v_key, v_seq, p_id[j], p_type[j],
                            p_head[j] || v_seq::text || p_tail[j]);
                END IF;
                v_out := v_out || v_seq;
            END LOOP;
            IF v_top <> v_first THEN
                UPDATE sessions SET last_seq = v_top WHERE session_id = v_key;
                v_notes := v_notes || json_build_array(v_key, v_top)::text;
            END IF;
            v_at := v_at + p_count[i];
        WHEN 'step' THEN
            INSERT INTO checkpoint_steps (execution_id, step_no, payload)
            VALUES (p_exec, p_int[i], p_bin[i]) ON CONFLICT (execution_id, step_no) DO NOTHING;
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'NUA03', MESSAGE = 'checkpoint_steps',
                    DETAIL = p_exec || '/' || p_int[i], HINT = 'already recorded';
            END IF;
        WHEN 'full' THEN
            INSERT INTO checkpoints (execution_id, step_no, payload)
            VALUES (p_exec, p_int[i], p_bin[i]) ON CONFLICT (execution_id, step_no) DO NOTHING;
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'NUA03', MESSAGE = 'checkpoints',
                    DETAIL = p_exec || '/' || p_int[i], HINT = 'already recorded';
            END IF;
        WHEN 'start' THEN
            INSERT INTO tool_ledger (execution_id, tool_call_id, status, idempotency_key,
                result, updated_at) VALUES (p_exec, v_key, 'started', p_text[i], NULL, p_num[i])
            ON CONFLICT (execution_id, tool_call_id) DO UPDATE SET status = 'started',
                idempotency_key = excluded.idempotency_key, updated_at = excluded.updated_at
            WHERE tool_ledger.status <> 'completed';
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'NUA03', MESSAGE = 'tool call',
                    DETAIL = v_key, HINT = 'already completed';
            END IF;
        WHEN 'complete' THEN
            UPDATE tool_ledger SET status = 'completed', result = p_text[i],
                updated_at = p_num[i]
            WHERE execution_id = p_exec AND tool_call_id = v_key;
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'NUA02', MESSAGE = 'tool call', DETAIL = v_key;
            END IF;
        WHEN 'unknown' THEN
            UPDATE tool_ledger SET status = 'unknown', result = NULL, updated_at = p_num[i]
            WHERE execution_id = p_exec AND tool_call_id = v_key AND status = 'started';
            IF NOT FOUND THEN
                SELECT status INTO v_status FROM tool_ledger
                WHERE execution_id = p_exec AND tool_call_id = v_key;
                IF NOT FOUND THEN
                    RAISE EXCEPTION USING ERRCODE = 'NUA02', MESSAGE = 'tool call',
                        DETAIL = v_key;
                END IF;
                RAISE EXCEPTION USING ERRCODE = 'NUA03', MESSAGE = 'tool call',
                    DETAIL = v_key, HINT = 'is ' || v_status || ', not started';
            END IF;
        ELSE
            RAISE EXCEPTION 'nua_unit: unknown op kind %', p_kind[i];
        END CASE;
    END LOOP;
    IF array_length(v_notes, 1) <= 100 THEN
        PERFORM pg_notify('nua_actions', '[' || array_to_string(v_notes, ',') || ']');
    ELSIF array_length(v_notes, 1) > 100 THEN
        PERFORM nua_notify(v_notes);
    END IF;
    RETURN v_out;
END
$fn$;

DROP FUNCTION nua_append_session(TEXT, TEXT[], TEXT[], TEXT[], TEXT[]);
