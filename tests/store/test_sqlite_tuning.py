"""SQLite-only performance measures that must not change what is stored."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from opennua.store import (
    NotFound,
    SessionRecord,
    Unavailable,
    WriteConflict,
    _sqlite,
    open_store,
)
from opennua.store._actions import encode_actions
from opennua.store._sql import Effects
from opennua.store._sqlite_ops import SQLiteDialect

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


async def test_a_failed_run_of_appends_without_savepoint_commits_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A batch that is one run of appends has no SAVEPOINT: if the run fails after its
    # writes, the ROLLBACK of the whole transaction must undo them.
    real = SQLiteDialect.append
    armed = True

    def fail_after_writing(self: SQLiteDialect, items: Any, fx: Any) -> Any:
        results = yield from real(self, items, fx)
        if armed:
            raise Unavailable("injected")
        return results

    monkeypatch.setattr(SQLiteDialect, "append", fail_after_writing)
    async with await open_store(f"sqlite:///{tmp_path}/fail.db") as store:
        for sid in ("ses_a", "ses_b"):
            await store.create_session(sid, created_at=1.0)
        outcomes = await asyncio.gather(
            store.append("ses_a", [action("ses_a", 1)]),
            store.append("ses_b", [action("ses_b", 1)]),
            return_exceptions=True,
        )
        assert all(isinstance(o, Unavailable) for o in outcomes), outcomes
        for sid in ("ses_a", "ses_b"):
            assert await store.read(sid) == []
            assert (await store.get_session(sid)).last_seq == 0
        armed = False
        assert await store.append("ses_a", [action("ses_a", 1)]) == [1]


async def test_a_batch_runs_without_savepoints_and_a_failing_unit_still_fails_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Units queued together are one transaction, first without a SAVEPOINT each; when
    # one of them fails, the transaction is rolled back and the batch runs again with
    # SAVEPOINTs, so the others commit and the failed one leaves nothing behind.
    taken: list[bool] = []
    real = _sqlite.SQLiteStore._run_unit

    def recording(
        self: _sqlite.SQLiteStore, conn: Any, unit: Any, wakeups: Any, *, savepoint: bool = True
    ) -> Any:
        taken.append(savepoint)
        return real(self, conn, unit, wakeups, savepoint=savepoint)

    monkeypatch.setattr(_sqlite.SQLiteStore, "_run_unit", recording)
    async with await open_store(f"sqlite:///{tmp_path}/units.db") as store:
        await store.create_session("ses_taken", created_at=1.0)

        async def start(sid: str, *, clash: bool = False) -> None:
            async with store.transaction() as tx:
                tx.create_session(SessionRecord(session_id=sid, created_at=1.0))
                tx.append(sid, [action(sid, 1)])
                if clash:  # after its writes: they must not survive
                    tx.create_session(SessionRecord(session_id="ses_taken", created_at=1.0))

        taken.clear()
        await asyncio.gather(*(start(f"ses_{n}") for n in range(5)))
        assert taken == [False] * 5  # one batch, no SAVEPOINT
        taken.clear()
        outcomes = await asyncio.gather(
            start("ses_a"), start("ses_bad", clash=True), start("ses_b"), return_exceptions=True
        )
        assert outcomes[0] is None and outcomes[2] is None
        assert isinstance(outcomes[1], WriteConflict)
        assert taken == [False, False, True, True, True]  # the failure, then all again
        for sid in ("ses_a", "ses_b", "ses_4"):
            assert [a["seq"] for a in await store.read(sid)] == [1]
        with pytest.raises(NotFound):
            await store.get_session("ses_bad")


def test_an_append_to_a_session_without_actions_does_not_look_for_known_ids() -> None:
    # Known ids (a resumed attempt re-emitting its facts) exist only where actions do:
    # the first append of a new session (a webhook's) skips that read.
    def statements(last_seq: int) -> list[str]:
        program = SQLiteDialect().append(
            [("ses_a", encode_actions("ses_a", [action("ses_a", 1)]))], Effects()
        )
        sql = [program.send(None).sql]
        rows: list[Any] = [("ses_a", 1, last_seq)]
        with contextlib.suppress(StopIteration):
            while True:
                query = program.send(rows)
                sql.append(query.sql.split()[0])
                rows = []
        return sql[1:]

    assert statements(0) == ["INSERT", "UPDATE"]
    assert statements(5) == ["SELECT", "INSERT", "UPDATE"]
