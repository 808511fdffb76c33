-- The PostgreSQL definition of the journal ops: append, the fence, checkpoint records and
-- the tool ledger. This file is their only definition on PostgreSQL (SQLite's is
-- store/_sqlite_ops.py); the store sends a unit made of them as ONE call on an
-- autocommit connection, so the call is the transaction and a unit costs one round
-- trip, and any other unit calls it for these ops inside its own transaction.
--
-- Applied whole when a store opens and this file's sha256 differs from the one recorded
-- in server_functions (store/_migrations.py), under the migration lock and in the
-- migration transaction. It first drops every nua_* function, so a database whose
-- functions an older opennua installed ends up with exactly the ones below. Change a
-- signature only together with a marker migration, so an older opennua refuses the
-- database instead of calling functions that are gone.
--
-- Errors are raised with SQLSTATEs of our own, which store/_pg_calls.py maps back:
--   NUA01 Fenced   (MESSAGE execution id, DETAIL '<epoch> <current epoch>', HINT status)
--   NUA02 NotFound (MESSAGE kind, DETAIL key)
--   NUA03 WriteConflict (MESSAGE kind, DETAIL key, HINT reason)

DO $drop$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
             WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'nua\_%'
    LOOP
        EXECUTE 'DROP FUNCTION ' || f;
    END LOOP;
END
$drop$;

-- A unit: the fence check (p_fenced), then its appends, then its checkpoint and ledger
-- ops in order.
--
-- Appends: p_sess names the session of each append op; p_rowsid, p_id, p_type and p_body
-- hold one row per action, in op order. Each body arrives packed (store/_bodies.py), with 0
-- for its seq: the seq assigned here is the row's column, which a read puts back in
-- place. Re-appended ids (also repeats within the call) keep their seq and write
-- nothing. seqs: one per row.
-- A session that does not exist fails the call (NUA02) when p_whole; otherwise (a batch
-- of independent callers' appends) its rows get NULL and it is listed in missing. p_sess
-- may repeat a session; listing each once saves a lookup.
--
-- Other ops, p_kind per op: 'step' / 'full' (p_int step_no, p_bin payload), 'start' and
-- 'ran' (p_key tool_call_id, p_text idempotency key, p_num now), 'complete' (p_key, p_text
-- result JSON, p_num now), 'unknown' (p_key, p_num now).
CREATE OR REPLACE FUNCTION nua_unit(
    p_exec TEXT, p_fenced BOOLEAN, p_epoch BIGINT, p_owner TEXT, p_whole BOOLEAN,
    p_sess TEXT[], p_rowsid TEXT[], p_id TEXT[], p_type TEXT[], p_body BYTEA[],
    p_kind TEXT[], p_key TEXT[], p_text TEXT[], p_num DOUBLE PRECISION[], p_int BIGINT[],
    p_bin BYTEA[],
    OUT seqs BIGINT[], OUT missing TEXT[]
) LANGUAGE plpgsql AS $fn$
DECLARE
    v_epoch BIGINT;
    v_pos BIGINT;      -- the execution's integer key, which ledger and checkpoint rows hold
    v_status TEXT;
    v_owner TEXT;
    v_rows INT := coalesce(array_length(p_id, 1), 0);
    v_sids TEXT[];     -- the sessions found (and locked)
    v_sks BIGINT[];    -- their integer keys, which action_log rows hold
    v_rowi INT[];      -- per row: its session's index in v_sids (NULL: a missing session)
    v_rowsk BIGINT[];  -- per row: its session's key, which action_log rows hold
    v_top BIGINT[];    -- their last_seq, moved as rows are numbered
    v_was BIGINT[];    -- their last_seq before
    v_known BIGINT[];  -- per row: its seq if the id is already in its session
    v_new INT[];       -- the rows to insert
    v_new_keys TEXT[]; -- their session and id
    v_moved TEXT[];    -- the sessions whose last_seq moves
    v_notes TEXT[];
    v_at INT;
    v_i INT;
    v_key TEXT;
BEGIN
    IF p_fenced THEN
        -- Locked: a concurrent claim skips the row and a heartbeat waits, so the epoch
        -- cannot move between this check and the commit.
        SELECT pos, epoch, status, owner INTO v_pos, v_epoch, v_status, v_owner
        FROM executions WHERE execution_id = p_exec FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'NUA02', MESSAGE = 'execution', DETAIL = p_exec;
        END IF;
        IF v_epoch <> p_epoch OR v_status <> 'running'
           OR (p_owner IS NOT NULL AND p_owner IS DISTINCT FROM v_owner) THEN
            RAISE EXCEPTION USING ERRCODE = 'NUA01', MESSAGE = p_exec,
                DETAIL = p_epoch || ' ' || v_epoch, HINT = v_status;
        END IF;
    END IF;

    seqs := '{}';
    IF coalesce(array_length(p_sess, 1), 0) > 0 THEN
        -- Lock the session rows in session_id order before reading last_seq: append
        -- order is commit order, two calls cannot deadlock on them, and the lookup below
        -- runs after the lock, so it sees any concurrent append of the same id.
        --
        -- The lock, the lookup and the last_seq update below are spelled for one session
        -- or a few rows when that is all there is (a sequential appender, an attempt's
        -- step): the same statement over arrays costs PL/pgSQL several times as much to
        -- run (~200 against ~95 us for one row), and those calls are the ones that wait
        -- for their own commit. Each is one statement spelled twice, not another way of
        -- appending.
        IF array_length(p_sess, 1) = 1 THEN
            SELECT ARRAY[session_id], ARRAY[sk], ARRAY[last_seq] INTO v_sids, v_sks, v_top
            FROM sessions WHERE session_id = p_sess[1] FOR UPDATE;
        ELSE
            SELECT array_agg(s.session_id), array_agg(s.sk), array_agg(s.last_seq)
            INTO v_sids, v_sks, v_top
            FROM (SELECT session_id, sk, last_seq FROM sessions WHERE session_id = ANY(p_sess)
                  ORDER BY session_id FOR UPDATE) s;
        END IF;
        v_was := v_top;
        IF coalesce(array_length(v_sids, 1), 0) < array_length(p_sess, 1) THEN
            SELECT array_agg(u.sid ORDER BY u.ord) INTO missing
            FROM unnest(p_sess) WITH ORDINALITY AS u(sid, ord)
            WHERE array_position(v_sids, u.sid) IS NULL;
            IF p_whole AND missing IS NOT NULL THEN
                RAISE EXCEPTION USING ERRCODE = 'NUA02', MESSAGE = 'session',
                    DETAIL = missing[1];
            END IF;
        END IF;
        IF v_rows > 0 THEN
            v_rowi := array_fill(NULL::INT, ARRAY[v_rows]);
            v_rowsk := array_fill(NULL::BIGINT, ARRAY[v_rows]);
            FOR j IN 1 .. v_rows LOOP
                v_rowi[j] := array_position(v_sids, p_rowsid[j]);
                v_rowsk[j] := v_sks[v_rowi[j]];
            END LOOP;
            -- Each id is looked up in the unique (sk, action_id) index: a probe per row for
            -- a few rows, correlated probes in one statement for more (a join with the rows
            -- could be planned as a scan of action_log).
            IF v_rows <= 8 THEN
                v_known := array_fill(NULL::BIGINT, ARRAY[v_rows]);
                FOR j IN 1 .. v_rows LOOP
                    v_known[j] := (SELECT a.seq FROM action_log a
                                   WHERE a.sk = v_rowsk[j] AND a.action_id = p_id[j]);
                END LOOP;
            ELSE
                SELECT array_agg((SELECT a.seq FROM action_log a
                                  WHERE a.sk = t.sk AND a.action_id = t.aid)
                                 ORDER BY t.ord)
                INTO v_known
                FROM unnest(v_rowsk, p_id) WITH ORDINALITY AS t(sk, aid, ord);
            END IF;
            seqs := array_fill(NULL::BIGINT, ARRAY[v_rows]);
            FOR j IN 1 .. v_rows LOOP
                v_i := v_rowi[j];
                IF v_i IS NULL THEN
                    CONTINUE;  -- a missing session: its rows stay NULL
                ELSIF v_known[j] IS NOT NULL THEN
                    seqs[j] := v_known[j];
                    CONTINUE;
                END IF;
                v_key := length(p_rowsid[j]) || ':' || p_rowsid[j] || p_id[j];
                v_at := array_position(v_new_keys, v_key);
                IF v_at IS NOT NULL THEN  -- a repeat of an id new in this call
                    seqs[j] := seqs[v_new[v_at]];
                ELSE
                    v_top[v_i] := v_top[v_i] + 1;
                    seqs[j] := v_top[v_i];
                    v_new := v_new || j;
                    v_new_keys := v_new_keys || v_key;
                END IF;
            END LOOP;
            IF v_new IS NOT NULL THEN
                INSERT INTO action_log (sk, seq, action_id, type, body)
                SELECT v_rowsk[n.j], seqs[n.j], p_id[n.j], p_type[n.j], p_body[n.j]
                FROM unnest(v_new) AS n(j);
                FOR i IN 1 .. array_length(v_sids, 1) LOOP
                    CONTINUE WHEN v_top[i] = v_was[i];
                    v_moved := v_moved || v_sids[i];
                    v_notes := v_notes || json_build_array(v_sids[i], v_top[i])::text;
                END LOOP;
                IF array_length(v_moved, 1) = 1 THEN
                    UPDATE sessions SET last_seq = v_top[array_position(v_sids, v_moved[1])]
                    WHERE session_id = v_moved[1];
                ELSE
                    UPDATE sessions SET last_seq = v_top[array_position(v_sids, session_id)]
                    WHERE session_id = ANY(v_moved);
                END IF;
                -- Wake-ups: payloads of at most 100 [session_id, last_seq] pairs (a payload
                -- must stay under 8000 bytes), delivered only if the transaction commits.
                FOR i IN 0 .. (array_length(v_notes, 1) - 1) / 100 LOOP
                    PERFORM pg_notify('nua_actions',
                        '[' || array_to_string(v_notes[i * 100 + 1 : i * 100 + 100], ',') || ']');
                END LOOP;
            END IF;
        END IF;
    END IF;

    FOR i IN 1 .. coalesce(array_length(p_kind, 1), 0) LOOP
        v_key := p_key[i];
        IF v_pos IS NULL THEN
            -- Not fenced by this call (an earlier call in its transaction was, or none is).
            SELECT pos INTO v_pos FROM executions WHERE execution_id = p_exec;
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'NUA02', MESSAGE = 'execution',
                    DETAIL = p_exec;
            END IF;
        END IF;
        CASE p_kind[i]
        WHEN 'step' THEN
            INSERT INTO step_records (pos, step_no, payload)
            VALUES (v_pos, p_int[i], p_bin[i]) ON CONFLICT (pos, step_no) DO NOTHING;
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'NUA03', MESSAGE = 'checkpoint_steps',
                    DETAIL = p_exec || '/' || p_int[i], HINT = 'already recorded';
            END IF;
        WHEN 'full' THEN
            INSERT INTO full_records (pos, step_no, payload)
            VALUES (v_pos, p_int[i], p_bin[i]) ON CONFLICT (pos, step_no) DO NOTHING;
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'NUA03', MESSAGE = 'checkpoints',
                    DETAIL = p_exec || '/' || p_int[i], HINT = 'already recorded';
            END IF;
        WHEN 'start', 'ran' THEN
            -- Re-starting is allowed (an idempotent re-run after a resume), re-starting
            -- a completed call is not: its effect already happened. 'ran': started and
            -- completed in this unit, one row version instead of two.
            INSERT INTO ledger (pos, tool_call_id, status, idempotency_key, result,
                updated_at) VALUES (v_pos, v_key,
                CASE p_kind[i] WHEN 'ran' THEN 'completed' ELSE 'started' END,
                p_text[i], NULL, p_num[i])
            ON CONFLICT (pos, tool_call_id) DO UPDATE SET status = excluded.status,
                idempotency_key = excluded.idempotency_key, updated_at = excluded.updated_at
            WHERE ledger.status <> 'completed';
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'NUA03', MESSAGE = 'tool call',
                    DETAIL = v_key, HINT = 'already completed';
            END IF;
        WHEN 'complete' THEN
            UPDATE ledger SET status = 'completed', result = p_text[i],
                updated_at = p_num[i]
            WHERE pos = v_pos AND tool_call_id = v_key;
            IF NOT FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'NUA02', MESSAGE = 'tool call', DETAIL = v_key;
            END IF;
        WHEN 'unknown' THEN
            UPDATE ledger SET status = 'unknown', result = NULL, updated_at = p_num[i]
            WHERE pos = v_pos AND tool_call_id = v_key AND status = 'started';
            IF NOT FOUND THEN
                SELECT status INTO v_status FROM ledger
                WHERE pos = v_pos AND tool_call_id = v_key;
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
END
$fn$;
