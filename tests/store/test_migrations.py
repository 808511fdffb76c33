"""Numbered migrations: an older database is migrated on open, a newer one refused."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import psycopg
import pytest

from opennua.store import SchemaTooNew, open_store
from opennua.store._migrations import latest_version, migrate_postgres, migrate_sqlite
from opennua.store._sqlite import connect

from .conftest import action


def test_both_backends_ship_numbered_migrations() -> None:
    # The logical schema (migrations 1-2) is shared; later numbers may be one backend's
    # physical tuning alone (SQLite 3: the dedupe index order), so the counts may differ.
    assert latest_version("sqlite") >= 3
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
    assert "actions_by_action_id" in indexes and "actions_by_id" not in indexes
    assert "actions_by_action_id" in str(plan)


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
