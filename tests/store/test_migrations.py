"""Numbered migrations: an older database is migrated on open, a newer one refused."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import psycopg
import pytest

from opennua.store import SchemaTooNew, WriteConflict, open_store
from opennua.store._migrations import latest_version, migrate_postgres, migrate_sqlite
from opennua.store._sqlite import connect

from .conftest import action, one


def test_both_backends_ship_numbered_migrations() -> None:
    # The logical schema (migrations 1-2) is shared; later numbers may be one backend's
    # physical tuning alone (SQLite 3: the dedupe index order; 4: integer session keys),
    # so the counts may differ.
    assert latest_version("sqlite") >= 4
    assert latest_version("postgres") >= 2


async def test_sqlite_older_database_is_migrated_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = connect(path)
    assert migrate_sqlite(conn, target=1) == 1  # what an older opennua left behind
    conn.execute("INSERT INTO sessions (session_id, created_at, last_seq) VALUES ('ses_old', 1, 0)")
    conn.close()
    async with await open_store(f"sqlite:///{path}") as store:
        assert (await store.get_session("ses_old")).session_id == "ses_old"
        assert await store.append("ses_old", [action("ses_old", 1)]) == [1]
        assert await store.list_executions("ses_old") == []  # table from migration 2
    with closing(sqlite3.connect(path)) as conn:
        versions = conn.execute("SELECT version FROM schema_version").fetchall()
    assert versions == [(v,) for v in range(1, latest_version("sqlite") + 1)]


async def test_sqlite_v2_database_gets_the_action_id_index_and_keeps_dedupe(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v2.db"
    conn = connect(path)
    assert migrate_sqlite(conn, target=2) == 2
    conn.execute("INSERT INTO sessions (session_id, created_at, last_seq) VALUES ('ses_a', 1, 2)")
    for seq in (1, 2):
        action_id = action("ses_a", seq)["id"]
        conn.execute(
            "INSERT INTO actions VALUES ('ses_a', ?, ?, 't', ?)",
            (seq, action_id, f'{{"id":"{action_id}","seq":{seq}}}'),
        )
    conn.close()
    async with await open_store(f"sqlite:///{path}") as store:
        # Re-appending an id migrated from the old index keeps its seq; new ids continue.
        assert await store.append("ses_a", [action("ses_a", 2), action("ses_a", 3)]) == [2, 3]
        assert [a["seq"] for a in await store.read("ses_a")] == [1, 2, 3]
    with closing(sqlite3.connect(path)) as conn:
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT seq FROM actions WHERE session_id = ? AND action_id = ?",
            ("ses_a", action("ses_a", 2)["id"]),
        ).fetchall()
    # Migration 3's id-first index lives on in migration 4's action_log.
    assert "action_log_by_id" in indexes and "actions_by_id" not in indexes
    assert "action_log_by_id" in str(plan)


async def test_sqlite_v3_database_gets_integer_session_keys_and_keeps_everything(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v3.db"
    conn = connect(path)
    assert migrate_sqlite(conn, target=3) == 3
    for n, sid in enumerate(("ses_b", "ses_a"), start=1):  # sk follows creation order
        conn.execute(
            "INSERT INTO sessions (session_id, created_at, title, metadata, last_seq) "
            "VALUES (?, ?, ?, '{\"k\":1}', 2)",
            (sid, float(n), f"title {sid}"),
        )
        for seq in (1, 2):
            act = {**action(sid, seq), "seq": seq}
            conn.execute(
                "INSERT INTO actions VALUES (?, ?, ?, ?, ?)",
                (sid, seq, act["id"], act["type"], json.dumps(act)),
            )
    # The same id in two sessions is two actions (dedupe is per session).
    shared = {"id": "act_shared", "type": "t", "seq": 3}
    conn.execute(
        "INSERT INTO actions VALUES ('ses_a', 3, 'act_shared', 't', ?)", (json.dumps(shared),)
    )
    conn.execute("UPDATE sessions SET last_seq = 3 WHERE session_id = 'ses_a'")
    conn.close()

    async with await open_store(f"sqlite:///{path}") as store:
        a = await store.get_session("ses_a")
        assert (a.title, a.metadata, a.last_seq) == ("title ses_a", {"k": 1}, 3)
        page = await store.list_session_summaries()
        assert [s.session.session_id for s in page.items] == ["ses_a", "ses_b"]
        # Re-appended ids keep their seqs and write nothing; new ids continue the log.
        assert await store.append("ses_a", [action("ses_a", 2), action("ses_a", 4)]) == [2, 4]
        assert await store.append("ses_b", [action("ses_b", 1)]) == [1]
        shared = {"id": "act_shared", "type": "t"}
        assert await store.append("ses_b", [shared]) == [3]
        assert await store.append("ses_a", [shared]) == [3]
        assert [x["seq"] for x in await store.read("ses_a")] == [1, 2, 3, 4]
        assert [x["id"] for x in await store.read("ses_b")] == [
            action("ses_b", 1)["id"],
            action("ses_b", 2)["id"],
            "act_shared",
        ]
        assert (await store.get_session("ses_b")).last_seq == 3
        await store.create_session("ses_c", created_at=3.0)
        assert await store.append("ses_c", [action("ses_c", 1)]) == [1]
    # And again after a restart (the dedupe is in the database, not in memory).
    async with await open_store(f"sqlite:///{path}") as store:
        assert await store.append("ses_a", [action("ses_a", 4), action("ses_a", 5)]) == [4, 5]
    with closing(sqlite3.connect(path)) as conn:
        keys = conn.execute("SELECT session_id, sk FROM sessions ORDER BY sk").fetchall()
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert keys == [("ses_b", 1), ("ses_a", 2), ("ses_c", 3)]


async def test_sqlite_v4_database_gets_a_clustered_ledger_and_keeps_entries_and_bodies(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v4.db"
    conn = connect(path)
    assert migrate_sqlite(conn, target=4) == 4
    conn.execute("INSERT INTO sessions (session_id, created_at, last_seq) VALUES ('ses_a', 1, 1)")
    old = {**action("ses_a", 1), "seq": 1}  # a JSON text body, as v4 wrote them
    conn.execute(
        "INSERT INTO action_log (sk, seq, action_id, type, body) VALUES (1, 1, ?, ?, ?)",
        (old["id"], old["type"], json.dumps(old)),
    )
    conn.execute(
        "INSERT INTO executions (execution_id, session_id, turn_id, status, created_at, epoch) "
        "VALUES ('exe_1', 'ses_a', 'trn_1', 'running', 1, 1)"
    )
    conn.executemany(
        "INSERT INTO tool_ledger VALUES ('exe_1', ?, ?, ?, ?, 1.0)",
        [
            ("call_done", "completed", "k1", '{"rows":3}'),
            ("call_open", "started", "k2", None),
            ("call_lost", "unknown", None, None),
        ],
    )
    conn.close()

    async with await open_store(f"sqlite:///{path}") as store:
        ledger = {e.tool_call_id: e for e in await store.get_ledger("exe_1")}
        assert {k: (e.status, e.idempotency_key, e.result) for k, e in ledger.items()} == {
            "call_done": ("completed", "k1", {"rows": 3}),
            "call_open": ("started", "k2", None),
            "call_lost": ("unknown", None, None),
        }
        async with store.fenced("exe_1", 1) as tx:  # the key still holds: a completed
            tx.ledger_complete("call_open", result=None, now=2.0)  # call moves in place
            tx.ledger_start("call_new", idempotency_key="k3", now=2.0)
        with pytest.raises(WriteConflict):
            async with store.fenced("exe_1", 1) as tx:
                tx.ledger_start("call_done", now=3.0)
        assert await store.append("ses_a", [action("ses_a", 2)]) == [2]
        # The v4 text body and the new compressed one read alike.
        assert await store.read("ses_a") == [old, {**action("ses_a", 2), "seq": 2}]
    with closing(sqlite3.connect(path)) as conn:
        statuses = dict(conn.execute("SELECT tool_call_id, status FROM tool_ledger"))
        (ddl,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'tool_ledger'").fetchone()
        indexes = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tool_ledger'"
        ).fetchall()
        kinds = [r[0] for r in conn.execute("SELECT typeof(body) FROM action_log ORDER BY seq")]
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert statuses == {
        "call_done": "completed",
        "call_open": "completed",
        "call_lost": "unknown",
        "call_new": "started",
    }
    assert "WITHOUT ROWID" in ddl and indexes == []  # the table is its key's only b-tree
    assert kinds == ["text", "blob"]


async def test_sqlite_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    async with await open_store(f"sqlite:///{path}"):
        pass
    future = latest_version("sqlite") + 1
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("INSERT INTO schema_version VALUES (?, 'from the future')", (future,))
        conn.commit()
    with pytest.raises(SchemaTooNew) as caught:
        await open_store(f"sqlite:///{path}")
    assert (caught.value.found, caught.value.supported) == (future, latest_version("sqlite"))


@pytest.mark.postgres
async def test_postgres_v23_database_gets_integer_session_keys_and_keeps_everything(
    pg_url: str,
) -> None:
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        assert await migrate_postgres(conn, target=23) == 23
        for n, sid in enumerate(("ses_b", "ses_a"), start=1):
            await conn.execute(
                "INSERT INTO sessions (session_id, created_at, title, last_seq) "
                "VALUES (%s, %s, %s, 2)",
                (sid, float(n), f"title {sid}"),
            )
            for seq in (1, 2):
                act = {**action(sid, seq), "seq": seq}  # JSON text bodies, as rows once were
                await conn.execute(
                    "INSERT INTO actions VALUES (%s, %s, %s, %s, %s)",
                    (sid, seq, act["id"], act["type"], json.dumps(act).encode()),
                )
        # The same id in two sessions is two actions (dedupe is per session).
        shared = {"id": "act_shared", "type": "t", "seq": 3}
        await conn.execute(
            "INSERT INTO actions VALUES ('ses_a', 3, 'act_shared', 't', %s)",
            (json.dumps(shared).encode(),),
        )
        await conn.execute("UPDATE sessions SET last_seq = 3 WHERE session_id = 'ses_a'")

    async with await open_store(pg_url) as store:
        a = await store.get_session("ses_a")
        assert (a.title, a.last_seq) == ("title ses_a", 3)
        # Re-appended ids keep their seqs and write nothing; new ids continue the log.
        assert await store.append("ses_a", [action("ses_a", 2), action("ses_a", 4)]) == [2, 4]
        assert await store.append("ses_b", [action("ses_b", 1)]) == [1]
        assert await store.append("ses_b", [{"id": "act_shared", "type": "t"}]) == [3]
        assert await store.append("ses_a", [{"id": "act_shared", "type": "t"}]) == [3]
        assert [x["seq"] for x in await store.read("ses_a")] == [1, 2, 3, 4]
        assert [x["id"] for x in await store.read("ses_b")] == [
            action("ses_b", 1)["id"],
            action("ses_b", 2)["id"],
            "act_shared",
        ]
        await store.create_session("ses_c", created_at=3.0)
        assert await store.append("ses_c", [action("ses_c", 1)]) == [1]
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT s.session_id, count(*) FROM action_log a JOIN sessions s ON s.sk = a.sk "
            "GROUP BY s.session_id ORDER BY s.session_id"
        )
        assert await cur.fetchall() == [("ses_a", 4), ("ses_b", 3), ("ses_c", 1)]
        cur = await conn.execute(
            "SELECT relkind FROM pg_class WHERE relname = 'actions' "
            "AND relnamespace = current_schema()::regnamespace"
        )
        assert await cur.fetchall() == [("v",)]  # the logical schema, over action_log


@pytest.mark.postgres
async def test_postgres_v24_database_gets_a_ledger_keyed_by_execution_and_keeps_entries(
    pg_url: str,
) -> None:
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        assert await migrate_postgres(conn, target=24) == 24
        await conn.execute("INSERT INTO sessions (session_id, created_at) VALUES ('ses_a', 1)")
        for eid in ("exe_a", "exe_b"):
            await conn.execute(
                "INSERT INTO executions (execution_id, session_id, turn_id, status, created_at)"
                " VALUES (%s, 'ses_a', 'trn_1', 'queued', 1)",
                (eid,),
            )
        for eid, call, status, key, result in (
            ("exe_a", "call_1", "completed", None, '{"ok":1}'),
            ("exe_a", "call_2", "started", "idem-2", None),
            ("exe_b", "call_1", "started", None, None),  # the same call id, another execution
        ):
            await conn.execute(
                "INSERT INTO tool_ledger VALUES (%s, %s, %s, %s, %s, 5.0)",
                (eid, call, status, key, result),
            )

    async with await open_store(pg_url) as store:
        got = {
            (e.tool_call_id, e.status, e.idempotency_key) for e in await store.get_ledger("exe_a")
        }
        assert got == {("call_1", "completed", None), ("call_2", "started", "idem-2")}
        assert [e.status for e in await store.get_ledger("exe_b")] == ["started"]
        # An update through the view (an execution ended with a call still started) lands
        # in the table, for that execution alone.
        ended = await one(store).end_unowned("exe_a", "revoked", error=None, now=6.0, actions=[])
        assert ended is not None
        assert {e.tool_call_id: e.status for e in await store.get_ledger("exe_a")} == {
            "call_1": "completed",
            "call_2": "unknown",
        }
        assert [e.status for e in await store.get_ledger("exe_b")] == ["started"]
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT e.execution_id, l.tool_call_id, l.status FROM ledger l "
            "JOIN executions e ON e.pos = l.pos ORDER BY 1, 2"
        )
        assert await cur.fetchall() == [
            ("exe_a", "call_1", "completed"),
            ("exe_a", "call_2", "unknown"),
            ("exe_b", "call_1", "started"),
        ]


@pytest.mark.postgres
async def test_postgres_v25_database_gets_checkpoints_keyed_by_execution_and_keeps_them(
    pg_url: str,
) -> None:
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        assert await migrate_postgres(conn, target=25) == 25
        await conn.execute("INSERT INTO sessions (session_id, created_at) VALUES ('ses_a', 1)")
        for eid, status in (("exe_a", "queued"), ("exe_b", "completed")):
            await conn.execute(
                "INSERT INTO executions (execution_id, session_id, turn_id, status, created_at)"
                " VALUES (%s, 'ses_a', 'trn_1', %s, 1)",
                (eid, status),
            )
        # The same step numbers in two executions: each keeps its own.
        for eid in ("exe_a", "exe_b"):
            await conn.execute(
                "INSERT INTO checkpoints VALUES (%s, 2, %s)", (eid, f"{eid} full 2".encode())
            )
            for step in (1, 2, 3):
                await conn.execute(
                    "INSERT INTO checkpoint_steps VALUES (%s, %s, %s)",
                    (eid, step, f"{eid} step {step}".encode()),
                )

    async with await open_store(pg_url) as store:
        for eid in ("exe_a", "exe_b"):
            loaded = await store.load_checkpoint(eid)
            assert loaded.full is not None and loaded.full.payload == f"{eid} full 2".encode()
            assert [(s.step_no, s.payload) for s in loaded.steps] == [(3, f"{eid} step 3".encode())]
        # New records land in the tables; a prune through the views deletes the records
        # of its execution alone.
        claimed = await store.claim("sup", 10.0, 30.0)
        assert claimed is not None and claimed.execution.execution_id == "exe_a"
        async with store.fenced("exe_a", claimed.epoch) as tx:
            tx.put_checkpoint_step(4, b"exe_a step 4")
            tx.put_full_checkpoint(4, b"exe_a full 4")
            tx.prune_checkpoints(4)
        loaded = await store.load_checkpoint("exe_a")
        assert loaded.full is not None and loaded.full.payload == b"exe_a full 4"
        assert loaded.steps == []
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        for table, want in (
            ("full_records", [("exe_a", 4), ("exe_b", 2)]),
            ("step_records", [("exe_b", 1), ("exe_b", 2), ("exe_b", 3)]),
        ):
            cur = await conn.execute(
                f"SELECT e.execution_id, r.step_no FROM {table} r "
                "JOIN executions e ON e.pos = r.pos ORDER BY 1, 2"
            )
            assert await cur.fetchall() == want
        cur = await conn.execute(
            "SELECT table_name FROM information_schema.views"
            " WHERE table_name IN ('checkpoints', 'checkpoint_steps') ORDER BY 1"
        )
        assert await cur.fetchall() == [("checkpoint_steps",), ("checkpoints",)]


@pytest.mark.postgres
async def test_postgres_older_database_is_migrated_and_newer_refused(pg_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        assert await migrate_postgres(conn, target=1) == 1
        await conn.execute(
            "INSERT INTO sessions (session_id, created_at, last_seq) VALUES ('ses_old', 1, 0)"
        )
    async with await open_store(pg_url) as store:
        assert await store.append("ses_old", [action("ses_old", 1)]) == [1]
        assert await store.list_executions("ses_old") == []
    future = latest_version("postgres") + 1
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute("INSERT INTO schema_version VALUES (%s, 'future')", (future,))
    with pytest.raises(SchemaTooNew) as caught:
        await open_store(pg_url)
    assert caught.value.found == future
