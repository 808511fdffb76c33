-- nua_append_rows with a constant number of statements per batch instead of four per
-- session: a run of appends from 25-100 sessions was four SQL statements per session
-- (lock, lookup, insert, move last_seq), now it is six for the whole batch. Same
-- contract as in 0003 (see there and docs/store.md); p_rowsid: each row's session_id.
DROP FUNCTION nua_append_rows(TEXT[], INT[], TEXT[], TEXT[], TEXT[], TEXT[]);

CREATE FUNCTION nua_append_rows(
    p_session TEXT[], p_count INT[], p_rowsid TEXT[], p_id TEXT[], p_type TEXT[],
    p_head TEXT[], p_tail TEXT[]
) RETURNS BIGINT[] LANGUAGE plpgsql AS $fn$
DECLARE
    v_last BIGINT[];
    v_known BIGINT[];
    v_first BIGINT[];
    v_out BIGINT[];
    v_new_at INT[] := '{}';
    v_new_seq BIGINT[] := '{}';
    v_moved_sid TEXT[] := '{}';
    v_moved_seq BIGINT[] := '{}';
    v_notes TEXT[] := '{}';
    v_seq BIGINT;
    v_at INT := 1;
    v_end INT;
    v_top BIGINT;
    v_rows INT := coalesce(array_length(p_id, 1), 0);
BEGIN
    IF v_rows = 0 THEN
        RETURN '{}';
    END IF;
    -- Lock the session rows in session_id order (p_session is sorted), then read last_seq:
    -- append order is commit order, and two batches cannot deadlock.
    PERFORM 1 FROM sessions WHERE session_id = ANY(p_session) ORDER BY session_id FOR UPDATE;
    SELECT array_agg(
        (SELECT s.last_seq FROM sessions s WHERE s.session_id = t.sid) ORDER BY t.ord)
    INTO v_last FROM unnest(p_session) WITH ORDINALITY AS t(sid, ord);
    -- After the lock, so a concurrent append of the same id is seen. Correlated lookups:
    -- one index probe per row whatever plan the statistics suggest.
    SELECT array_agg(x.known ORDER BY x.ord), array_agg(x.first ORDER BY x.ord)
    INTO v_known, v_first
    FROM (
        SELECT t.ord, min(t.ord) OVER (PARTITION BY t.sid, t.aid) AS first,
               (SELECT a.seq FROM actions a
                WHERE a.session_id = t.sid AND a.action_id = t.aid) AS known
        FROM unnest(p_rowsid, p_id) WITH ORDINALITY AS t(sid, aid, ord)
    ) x;
    v_out := array_fill(NULL::BIGINT, ARRAY[v_rows]);
    FOR i IN 1 .. array_length(p_session, 1) LOOP
        v_end := v_at + p_count[i] - 1;
        v_top := v_last[i];
        IF v_top IS NOT NULL THEN  -- NULL: no such session, its rows stay NULL
            FOR j IN v_at .. v_end LOOP
                IF v_known[j] IS NOT NULL THEN
                    v_seq := v_known[j];
                ELSIF v_first[j] < j THEN  -- a repeat of an id new in this call
                    v_seq := v_out[v_first[j]];
                ELSE
                    v_top := v_top + 1;
                    v_seq := v_top;
                    v_new_at := v_new_at || j;
                    v_new_seq := v_new_seq || v_seq;
                END IF;
                v_out[j] := v_seq;
            END LOOP;
            IF v_top <> v_last[i] THEN
                v_moved_sid := v_moved_sid || p_session[i];
                v_moved_seq := v_moved_seq || v_top;
                v_notes := v_notes || json_build_array(p_session[i], v_top)::text;
            END IF;
        END IF;
        v_at := v_end + 1;
    END LOOP;
    IF array_length(v_new_at, 1) > 0 THEN
        INSERT INTO actions (session_id, seq, action_id, type, body)
        SELECT p_rowsid[n.at], n.seq, p_id[n.at], p_type[n.at],
               p_head[n.at] || n.seq::text || p_tail[n.at]
        FROM unnest(v_new_at, v_new_seq) AS n(at, seq);
        UPDATE sessions s SET last_seq = m.seq
        FROM unnest(v_moved_sid, v_moved_seq) AS m(sid, seq)
        WHERE s.session_id = m.sid;
        PERFORM nua_notify(v_notes);
    END IF;
    RETURN v_out;
END
$fn$;
