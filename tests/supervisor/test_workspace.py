"""A session's files carry over from turn to turn: two turns of one session through the
supervisor on a real store, the second reading what the first wrote, in a workspace that is
0700 whatever the umask."""

from __future__ import annotations

import asyncio
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from opennua.runtime import default_agent
from opennua.runtime.testing import ScriptedModel
from opennua.store import Execution, open_store
from opennua.supervisor import execution_dir
from tests._support.polling import until
from tests._support.supervisor import (
    EID,
    EID2,
    SID,
    accept,
    make_supervisor,
    second_turn,
    session_state,
    two_turn_script,
)


@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0)  # the most permissive: the directories must be 0700 anyway
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.usefixtures("open_umask")
async def test_files_written_in_turn_1_are_there_in_turn_2(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with store:
        await accept(store, time.time())
        supervisor = make_supervisor(
            store, tmp_path, default_agent("scripted:test"), model=ScriptedModel(two_turn_script)
        )
        runner = asyncio.create_task(supervisor.run())

        def completed(eid: str) -> Any:
            async def check() -> bool:
                return (await store.get_execution(eid)).status == "completed"

            return check

        try:
            await until(completed(EID))
            await second_turn(store, time.time())
            supervisor.nudge()
            await until(completed(EID2))
        finally:
            await supervisor.shutdown()
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        state = await session_state(store)
    first, second = state["turns"]
    assert [t["stop_reason"] for t in state["turns"]] == ["end_turn", "end_turn"]
    read, listed = sorted(second["tool_calls"].values(), key=lambda c: c["name"])[::-1]
    assert (read["name"], read["status"], read["output"]) == (
        "read_file",
        "completed",
        "from turn 1",
    ), read["error"]
    assert listed["output"] == "notes/\nnotes/plan.md"
    # One directory per session, not per execution; private whatever the umask.
    workspace = tmp_path / "workspaces" / SID
    assert sorted(p.name for p in (tmp_path / "workspaces").iterdir()) == [SID]
    for directory in (tmp_path / "workspaces", workspace):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    assert first["tool_calls"] and (workspace / "notes" / "plan.md").read_text() == "from turn 1"


def test_the_workspace_function_is_the_one_place_that_decides(tmp_path: Path) -> None:
    def execution(session_id: str, execution_id: str) -> Execution:
        return Execution(
            execution_id=execution_id,
            session_id=session_id,
            turn_id="trn_x",
            status="queued",
            created_at=0.0,
        )

    one = execution_dir(tmp_path, execution(SID, EID))
    assert one == tmp_path / "workspaces" / SID and one.is_dir()
    assert execution_dir(tmp_path, execution(SID, EID2)) == one
    (tmp_path / "workspaces").chmod(0o755)  # an older install's
    execution_dir(tmp_path, execution(SID, EID2))
    assert stat.S_IMODE((tmp_path / "workspaces").stat().st_mode) == 0o700
    for bad in ("../escape", "ses/x", "", ".hidden"):
        with pytest.raises(ValueError, match="cannot name a directory"):
            execution_dir(tmp_path, execution(bad, EID))
