"""``Store.check_writable()``: the readiness probe says whether a write can happen now."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from opennua.store import Store, Unavailable, open_store
from opennua.store import _sqlite as sqlite_backend
from opennua.store._sql import Dialect, Effects, Op, Program, Query
from opennua.store._unit import Unit

from .conftest import action


async def _rows(store_url: str) -> int:
    """Every row of every table: the probe must add none."""
    tables = ["sessions", "actions", "executions", "attempts", "idempotency", "snapshots"]
    sql = " + ".join(f"(SELECT count(*) FROM {t})" for t in tables)
    if store_url.startswith("sqlite"):
        with closing(sqlite3.connect(store_url.removeprefix("sqlite:///"))) as db:
            return int(db.execute(f"SELECT {sql}").fetchone()[0])
    async with await psycopg.AsyncConnection.connect(store_url) as conn:
        cur = await conn.execute(f"SELECT {sql}")
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


@pytest.mark.on_disk
async def test_a_healthy_store_is_writable_quickly_and_the_probe_stores_nothing(
    store: Store, store_url: str
) -> None:
    await store.create_session("ses_a", created_at=1.0)
    before = await _rows(store_url)
    start = time.monotonic()
    for _ in range(20):
        await store.check_writable()
    assert (time.monotonic() - start) / 20 < 0.1
    assert await _rows(store_url) == before
    # Probes mixed into a busy writer change nothing either.
    await asyncio.gather(
        *(store.append("ses_a", [action("ses_a", n)]) for n in range(50)),
        *(store.check_writable() for _ in range(10)),
    )
    assert await _rows(store_url) == before + 50


async def test_a_closed_store_is_not_writable(store: Store) -> None:
    await store.close()
    with pytest.raises(Unavailable, match="closed"):
        await store.check_writable()


async def test_sqlite_locked_by_another_writer_is_not_writable_within_the_timeout(
    tmp_path: Path,
) -> None:
    path = tmp_path / "locked.db"
    async with await open_store(f"sqlite:///{path}") as store:
        store.check_writable_timeout = 0.5
        await store.check_writable()
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # holds the write lock, as another process would
        try:
            start = time.monotonic()
            with pytest.raises(Unavailable, match="did not start and finish"):
                await store.check_writable()
            assert time.monotonic() - start < 2.0
        finally:
            other.execute("ROLLBACK")
            other.close()
        await store.check_writable()  # the writer got the lock: writable again
        await store.create_session("ses_a", created_at=1.0)


@dataclass(frozen=True, slots=True)
class _Blocks(Op):
    """An op whose unit holds the writer until the test lets it go."""

    release: threading.Event

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        yield Query("SELECT 1")
        assert self.release.wait(30)


async def test_a_wedged_sqlite_writer_is_not_writable_within_the_timeout(tmp_path: Path) -> None:
    async with await open_store(f"sqlite:///{tmp_path}/wedged.db") as store:
        store.check_writable_timeout = 0.3
        release = threading.Event()
        stuck = asyncio.ensure_future(store._commit(Unit(None, (_Blocks(release),))))
        try:
            await asyncio.sleep(0.05)
            start = time.monotonic()
            with pytest.raises(Unavailable):
                await store.check_writable()
            assert time.monotonic() - start < 1.5
        finally:
            release.set()
        assert await stuck == [None]
        await store.check_writable()


@pytest.fixture
def writer_dies_at_start(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def fail(conn: Any, path: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(sqlite_backend, "_preallocate_wal", fail)
    yield


async def test_a_dead_sqlite_writer_fails_writes_at_once_and_is_not_writable(
    tmp_path: Path, writer_dies_at_start: None, caplog: pytest.LogCaptureFixture
) -> None:
    async with await open_store(f"sqlite:///{tmp_path}/dead.db") as store:
        deadline = time.monotonic() + 5
        while store._writer.is_alive():  # type: ignore[attr-defined]
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        with pytest.raises(Unavailable, match="disk on fire"):
            await store.check_writable()
        # A write fails at once instead of waiting for a writer that is gone.
        with pytest.raises(Unavailable, match="disk on fire"):
            await asyncio.wait_for(store.create_session("ses_a", created_at=1.0), 2)
    assert "the SQLite writer stopped" in caplog.text


async def test_units_queued_when_the_sqlite_writer_dies_fail_instead_of_hanging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await open_store(f"sqlite:///{tmp_path}/dies.db") as store:
        await store.create_session("ses_a", created_at=1.0)

        def fatal(*args: Any) -> Any:
            raise MemoryError("out of memory in the writer")

        # Dies outside any batch (settling it), with callers waiting.
        monkeypatch.setattr(store, "_loop", _LoopWhoseCallbacksFail(store._loop, fatal))  # type: ignore[attr-defined]
        outcomes = await asyncio.wait_for(
            asyncio.gather(
                *(store.append("ses_a", [action("ses_a", n)]) for n in range(5)),
                return_exceptions=True,
            ),
            5,
        )
        assert all(isinstance(o, Unavailable) for o in outcomes), outcomes
        with pytest.raises(Unavailable):
            await store.check_writable()


class _LoopWhoseCallbacksFail:
    """The store's loop, except that the writer's first hand-back of results raises."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fatal: Any) -> None:
        self._loop = loop
        self._fatal = fatal
        self._armed = True

    def call_soon_threadsafe(self, callback: Any, *args: Any) -> Any:
        if self._armed and getattr(callback, "__name__", "") == "_settle":
            self._armed = False
            self._fatal()
        return self._loop.call_soon_threadsafe(callback, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loop, name)


@pytest.mark.postgres
async def test_postgres_that_cannot_be_reached_is_not_writable_within_the_timeout(
    pg_url: str, pg_admin_url: str
) -> None:
    name = pg_url.rsplit("/", 1)[1]
    async with await open_store(pg_url) as store:
        store.check_writable_timeout = 1.0
        await store.check_writable()
        async with await psycopg.AsyncConnection.connect(pg_admin_url, autocommit=True) as admin:
            await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )
            try:
                start = time.monotonic()
                with pytest.raises(Unavailable):
                    await store.check_writable()
                assert time.monotonic() - start < 3.0
            finally:
                await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')


@pytest.mark.postgres
async def test_a_read_only_postgres_is_not_writable(pg_url: str, pg_admin_url: str) -> None:
    name = pg_url.rsplit("/", 1)[1]
    async with await open_store(pg_url) as store:
        await store.check_writable()
        async with await psycopg.AsyncConnection.connect(pg_admin_url, autocommit=True) as admin:
            await admin.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )
        await store._pool.check()  # type: ignore[attr-defined]  # reconnect: read-only now
        with pytest.raises(Unavailable, match="read-only"):
            await store.check_writable()
