"""A workspace commit follows only a tool call that may have changed files (issue 32): a
call whose tool declares a reading kind (`read`, `search`, `think`, `fetch`) commits
nothing after it, so a file such a tool wrote anyway is committed by the next call that
may write, or at the attempt's end, never lost from the turn's last manifest."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any

from opennua.runtime import ToolContext, default_agent, tool
from opennua.runtime.testing import ScriptedModel, ScriptStep, call, say
from opennua.store import open_store
from tests._support.polling import until
from tests._support.supervisor import EID, SID, accept, make_supervisor


@tool("peek", kind="read", idempotent=True)
def peek(ctx: ToolContext) -> str:
    """Declared a reader, yet leaves a file behind (what the declaration is trusted with)."""
    (ctx.workdir / "peeked.txt").write_text("left by a reader")
    return "peeked"


async def _run(tmp_path: Path, steps: list[ScriptStep]) -> list[dict[str, Any]]:
    base = default_agent("scripted:test")
    agent = dataclasses.replace(base, tools=(*base.tools, peek))
    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with store:
        await accept(store, time.time())
        supervisor = make_supervisor(store, tmp_path, agent, model=ScriptedModel(steps))
        runner = asyncio.create_task(supervisor.run())
        try:

            async def ended() -> bool:
                return (await store.get_execution(EID)).status == "completed"

            await until(ended)
        finally:
            await supervisor.shutdown()
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        return await store.read(SID, 0, 10_000)


def _story(actions: list[dict[str, Any]]) -> list[str]:
    """Tool call ends (by tool name) and workspace commits (by file count), in log order."""
    names: dict[str, str] = {}
    story = []
    for action in actions:
        data = action["data"]
        if action["type"] == "tool_call.started":
            names[data["tool_call_id"]] = data["name"]
        elif action["type"] == "tool_call.updated" and data["status"] == "completed":
            story.append(names[data["tool_call_id"]])
        elif action["type"] == "workspace.committed":
            story.append(f"commit {data['files']}")
    return story


async def test_a_reading_call_commits_nothing_and_the_next_writer_commits_its_file(
    tmp_path: Path,
) -> None:
    steps = [
        ScriptStep(calls=(call("peek"),)),
        ScriptStep(calls=(call("plan", entries=[{"content": "x", "status": "pending"}]),)),
        ScriptStep(calls=(call("write_file", path="notes.md", content="n"),)),
        say("done"),
    ]
    story = _story(await _run(tmp_path, steps))
    # Were every call followed by a commit, `peek` would be followed by "commit 1".
    assert story == ["peek", "plan", "write_file", "commit 2"], story


async def test_a_file_a_reader_left_is_committed_at_the_attempts_end(tmp_path: Path) -> None:
    story = _story(await _run(tmp_path, [ScriptStep(calls=(call("peek"),)), say("done")]))
    assert story == ["peek", "commit 1"], story
