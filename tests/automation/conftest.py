"""An embedded world for automation tests: a store (SQLite, or PostgreSQL via `pg_url`),
the default workspace and its owner, a Host with the built-in deployment, a fake clock."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from opennua.auth import Authority
from opennua.automation import Automation
from opennua.host import Hub, SessionHost
from opennua.secrets import SecretKey, SecretStore
from opennua.store import Store, open_store


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class World:
    store: Store
    host: SessionHost
    automation: Automation
    authority: Authority
    clock: Clock
    workspace_id: str
    owner_id: str


@contextlib.asynccontextmanager
async def world(url: str, data_dir: Path, now: float = 1_800_000_000.0) -> AsyncIterator[World]:
    clock = Clock(now)
    store = await open_store(url, data_dir=data_dir)
    try:
        authority = Authority(store, clock=clock)
        workspace = await authority.bootstrap("local-owner-token")
        owner = next(
            m.principal_id
            for m in await store.list_memberships(workspace_id=workspace.workspace_id)
            if m.role == "owner"
        )
        host = SessionHost(store, Hub(store), clock=clock, grant_check=authority.grant_problem)
        await host.registry.ensure_builtin("scripted:demo")
        secrets = await SecretStore.open(store, SecretKey.generate(), clock=clock)
        automation = Automation(store, host, secrets, clock=clock)
        yield World(store, host, automation, authority, clock, workspace.workspace_id, owner)
    finally:
        await store.close()


@pytest.fixture
async def sqlite_world(tmp_path: Path) -> AsyncIterator[World]:
    async with world(f"sqlite:///{tmp_path}/nua.db", tmp_path) as w:
        yield w


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def any_world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    """The same world on both backends (the store's automation ops are one program each)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/nua.db"
    else:
        url = request.getfixturevalue("pg_url")
    async with world(url, tmp_path) as w:
        yield w
