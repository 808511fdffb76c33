-- The PostgreSQL fast path: a whole unit of work in one server-side call, so a unit costs
-- one round trip (the call runs in autocommit mode, so the call is the transaction).
-- These functions restate the append, fence, checkpoint and ledger programs of
-- _log_ops.py / _exec_ops.py; the contract tests run both paths (see docs/store.md).
-- Errors are raised with SQLSTATEs of our own, which _pg_fast.py maps back:
--   NUA01 Fenced (DETAIL current epoch, HINT status)
--   NUA02 NotFound (MESSAGE kind, DETAIL key)
--   NUA03 Conflict (MESSAGE kind, DETAIL key, HINT reason)

-- Append to one session (its row must already be locked by the caller or is locked
-- here). Each action's body arrives as the JSON text before and after its seq value,
-- so the server puts the seq it assigns in place. seqs: one per input row, NULL when
-- the session does not exist; moved_to: the new last_seq, NULL when nothing was new.
-- Re-appended ids (also repeats within the call) keep their seq and write nothing.
CREATE FUNCTION nua_append_session(
    p_sid TEXT, p_id TEXT[], p_type TEXT[], p_head TEXT[], p_tail TEXT[],
    OUT seqs BIGINT[], OUT moved_to BIGINT
) LANGUAGE plpgsql AS $fn$
DECLARE
    v_first BIGINT;
    v_last BIGINT;
    v_seq BIGINT;
BEGIN
    SELECT last_seq INTO v_last FROM sessions WHERE session_id = p_sid FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_first := v_last;
    seqs := '{}';
    FOR i IN 1 .. coalesce(array_length(p_id, 1), 0) LOOP
        SELECT seq INTO v_seq FROM actions WHERE session_id = p_sid AND action_id = p_id[i];
        IF NOT FOUND THEN
            v_last := v_last + 1;
            v_seq := v_last;
            INSERT INTO actions (session_id, seq, action_id, type, body)
            VALUES (p_sid, v_seq, p_id[i], p_type[i], p_head[i] || v_seq::text || p_tail[i]);
        END IF;
        seqs := seqs || v_seq;
    END LOOP;
    IF v_last <> v_first THEN
        UPDATE sessions SET last_seq = v_last WHERE session_id = p_sid;
        moved_to := v_last;
    END IF;
END
$fn$;

-- NOTIFY the sessions that moved: payloads of at most 100 [session_id, last_seq] pairs
-- (a payload must stay under 8000 bytes). Delivered only if the transaction commits.
CREATE FUNCTION nua_notify(p_notes TEXT[]) RETURNS VOID LANGUAGE plpgsql AS $fn$
BEGIN
    IF coalesce(array_length(p_notes, 1), 0) = 0 THEN
        RETURN;
    END IF;
    FOR i IN 0 .. (array_length(p_notes, 1) - 1) / 100 LOOP
        PERFORM pg_notify('nua_actions',
            '[' || array_to_string(p_notes[i * 100 + 1 : i * 100 + 100], ',') || ']');
    END LOOP;
END
$fn$;

-- Append runs of actions to sessions, given grouped by session in session_id order (so
-- session rows are locked in that order: two batches cannot deadlock, and append order
-- is commit order). p_count: rows per session. Returns one seq per row, NULL for the
-- rows of a session that does not exist.
CREATE FUNCTION nua_append_rows(
    p_session TEXT[], p_count INT[], p_id TEXT[], p_type TEXT[], p_head TEXT[], p_tail TEXT[]
) RETURNS BIGINT[] LANGUAGE plpgsql AS $fn$
DECLARE
    v_out BIGINT[] := '{}';
    v_notes TEXT[] := '{}';
    v_seqs BIGINT[];
    v_moved BIGINT;
    v_at INT := 1;
    v_end INT;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_session, 1), 0) LOOP
        v_end := v_at + p_count[i] - 1;
        SELECT * INTO v_seqs, v_moved FROM nua_append_session(p_session[i],
            p_id[v_at : v_end], p_type[v_at : v_end], p_head[v_at : v_end],
            p_tail[v_at : v_end]);
        IF v_seqs IS NULL THEN
            v_seqs := array_fill(NULL::BIGINT, ARRAY[p_count[i]]);
        END IF;
        IF v_moved IS NOT NULL THEN
            v_notes := v_notes || json_build_array(p_session[i], v_moved)::text;
        END IF;
        v_out := v_out || v_seqs;
        v_at := v_end + 1;
    END LOOP;
    PERFORM nua_notify(v_notes);
    RETURN v_out;
END
$fn$;

-- A unit: an optional fence check, then ops in order. p_kind per op: 'append' (p_key
-- session_id, p_count actions taken in order from the action arrays), 'step' / 'full'
-- (p_int step_no, p_bin payload), 'start' (p_key tool_call_id, p_text idempotency key,
-- p_num now), 'complete' (p_key, p_text result JSON, p_num now), 'unknown' (p_key, p_num).
-- Returns the seqs of every append, concatenated in op order.
CREATE FUNCTION nua_unit(
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
    v_seqs BIGINT[];
    v_moved BIGINT;
    v_at INT := 1;
    v_n INT;
    v_step BIGINT;
    v_key TEXT;
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
            v_n := p_count[i];
            SELECT * INTO v_seqs, v_moved FROM nua_append_session(v_key,
                p_id[v_at : v_at + v_n - 1], p_type[v_at : v_at + v_n - 1],
                p_head[v_at : v_at + v_n - 1], p_tail[v_at : v_at + v_n - 1]);
            IF v_seqs IS NULL THEN
                RAISE EXCEPTION USING ERRCODE = 'NUA02', MESSAGE = 'session', DETAIL = v_key;
            END IF;
            IF v_moved IS NOT NULL THEN
                v_notes := v_notes || json_build_array(v_key, v_moved)::text;
            END IF;
            v_out := v_out || v_seqs;
            v_at := v_at + v_n;
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
    PERFORM nua_notify(v_notes);
    RETURN v_out;
END
$fn$;
