"""SQLite-only performance measures that must not change what is stored."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

from opennua.store import _sqlite, open_store

from .conftest import action


def _wal_size(path: Path) -> int:
    return os.path.getsize(f"{path}-wal")


async def test_wal_is_preallocated_and_nothing_of_it_is_committed(tmp_path: Path) -> None:
    path = tmp_path / "pre.db"
    async with await open_store(f"sqlite:///{path}") as store:
        await store.create_session("ses_a", created_at=1.0)
        assert await store.append("ses_a", [action("ses_a", 1)]) == [1]
        # The writer grew the WAL before its first commit; commits now overwrite it.
        assert _wal_size(path) >= _sqlite._WAL_PREALLOC_BYTES
        with closing(sqlite3.connect(path)) as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            assert "nua_wal_prealloc" not in tables
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    async with await open_store(f"sqlite:///{path}") as store:
        assert [a["seq"] for a in await store.read("ses_a")] == [1]
        assert await store.append("ses_a", [action("ses_a", 2)]) == [2]
