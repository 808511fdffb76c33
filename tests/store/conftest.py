"""The store contract suite runs every test once per backend: build the backend here,
nothing else differs (docs/architecture.md §10)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from opennua.store import Execution, Store, open_store

ON_DISK = ["sqlite", "sqlite-spaces", pytest.param("postgres", marks=pytest.mark.postgres)]
#: The in-memory store runs the whole contract too, except what only a disk has.
BACKENDS = [*ON_DISK, "memory"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store_url" in metafunc.fixturenames:
        on_disk = metafunc.definition.get_closest_marker("on_disk") is not None
        metafunc.parametrize("store_url", ON_DISK if on_disk else BACKENDS, indirect=True)


@pytest.fixture
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/nua.db"
    if request.param == "sqlite-spaces":
        folder = tmp_path / "a dir with spaces"
        return f"sqlite:///{folder}/nua store.db"
    if request.param == "memory":
        return "memory:"
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
async def store(store_url: str, tmp_path: Path) -> AsyncIterator[Store]:
    async with await open_store(store_url, data_dir=tmp_path / "data") as s:
        yield s


class FakeClock:
    """Unix seconds that move only when a test says so (time is passed in: docs/store.md)."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def action(session_id: str, n: int, *, kind: str = "message.delta", **data: Any) -> dict[str, Any]:
    """A realistic ~300-byte action envelope, as the Host appends it (seq unset)."""
    return {
        "v": 1,
        "session_id": session_id,
        "seq": None,
        "id": f"act_{session_id}_{n:06d}",
        "type": kind,
        "ts": "2026-11-29T08:00:00.123Z",
        "turn_id": "trn_01JDX0000000000000000000",
        "run_id": "run_01JDX0000000000000000000",
        "client_id": None,
        "intent_id": None,
        "data": data or {"message_id": "msg_01JDX0000000000000000000", "delta": f"token {n} "},
    }


def execution(
    execution_id: str,
    session_id: str,
    created_at: float,
    *,
    deadline_at: float | None = None,
    turn_id: str | None = None,
) -> Execution:
    return Execution(
        execution_id=execution_id,
        session_id=session_id,
        turn_id=turn_id or f"trn_{execution_id}",
        status="queued",
        created_at=created_at,
        principal_id="prn_owner",
        trigger={"kind": "message", "principal_id": "prn_owner"},
        input={"content": [{"type": "text", "text": "hello"}]},
        snapshot_digest="sha256:agent",
        deadline_at=deadline_at,
    )


class _OneUnit:
    """``await one(store).resolve_input(...)``: one `Transaction` op as its own unit, and
    its result (a test's shorthand for ``async with store.transaction() as tx``)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        async def run(*args: Any, **kwargs: Any) -> Any:
            async with self._store.transaction() as tx:
                handle = getattr(tx, name)(*args, **kwargs)
            return handle.value

        return run


def one(store: Store) -> Any:
    return _OneUnit(store)
