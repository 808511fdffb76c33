"""Real Synapse for the bridge tests; the `matrix` extra installs it (`.ci/run` does)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from opennua.bridge import Homeserver
from tests.server._serve_proc import Served, free_port, nua_serve

if importlib.util.find_spec("synapse") is None or importlib.util.find_spec("nio") is None:
    if os.environ.get("CI"):
        raise RuntimeError("CI is set but the `matrix` extra (Synapse, matrix-nio) is missing")
    collect_ignore_glob = ["test_matrix_bridge.py", "test_delivery_spans.py"]

if TYPE_CHECKING:
    from ._matrix_env import BridgeProc, Person, Synapse


@pytest.fixture(scope="module")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    """One real Synapse per module (SQLite, loopback): it takes seconds to start."""
    from ._matrix_env import Synapse

    hs = Homeserver.prepare(tmp_path_factory.mktemp("synapse"), free_port())
    running = Synapse(hs, hs.start(), {}, {})
    try:
        running.bot = hs.register("nua", "bot-password")
        running.users = {name: hs.register(name, f"{name}-pw") for name in ("alice", "mallory")}
        yield running
    finally:
        running.stop()  # the process now running: a test may have restarted it


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    # Slow enough that a test can act mid-turn, fast enough to finish in seconds.
    monkeypatch.setenv("NUA_DEMO_STEP_DELAY", "0.4")
    with nua_serve(tmp_path / "data", "--sandbox", "none") as s:
        yield s


@pytest.fixture
def bridge(served: Served, synapse: Synapse, tmp_path: Path) -> Iterator[BridgeProc]:
    from ._matrix_env import BridgeProc

    # alice is the workspace's owner in opennua; mallory a user who may only watch.
    with served.client() as http:
        owner = http.get("/v1/whoami").json()
        workspace = owner["workspaces"][0]["workspace_id"]
        viewer = http.post("/v1/users", json={"name": "mallory"}).json()["principal_id"]
        http.put(
            f"/v1/workspaces/{workspace}/members/{viewer}", json={"role": "viewer"}
        ).raise_for_status()
    members = {"alice": owner["principal_id"], "mallory": viewer}
    extra = [
        arg
        for name, principal in members.items()
        for arg in ("--member", f"{synapse.users[name]['user_id']}={principal}")
    ]
    proc = BridgeProc(served, synapse, tmp_path, extra=tuple(extra))
    proc.workspace, proc.principals = workspace, members
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        # Shown by pytest only when the test failed: what the bridge saw and did.
        print(proc.log()[-8000:])


@pytest.fixture
async def alice(synapse: Synapse) -> AsyncIterator[Person]:
    from ._matrix_env import Person

    person = Person(synapse, "alice")
    try:
        yield person
    finally:
        await person.close()


@pytest.fixture
async def mallory(synapse: Synapse) -> AsyncIterator[Person]:
    from ._matrix_env import Person

    person = Person(synapse, "mallory")
    try:
        yield person
    finally:
        await person.close()
