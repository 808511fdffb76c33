"""MCP tools: annotation mapping, in-process and a real stdio subprocess server."""

from __future__ import annotations

import dataclasses
import sys
from contextlib import AsyncExitStack
from pathlib import Path

from opennua.runtime import Completed, McpServer, default_agent
from opennua.runtime._mcp import connect_mcp
from opennua.runtime.testing import InMemoryJournal, ScriptedModel, ScriptStep, call, say
from tests.runtime.fixtures import mcp_server
from tests.runtime.helpers import drive, make_loop

SERVER_SCRIPT = Path(mcp_server.__file__)


async def test_annotations_map_to_kind_approval_idempotent() -> None:
    async with AsyncExitStack() as stack:
        tools = {
            t.name: t
            for t in await connect_mcp(stack, McpServer("notes", server=mcp_server.server))
        }
    flags = {n: (t.kind, t.requires_approval, t.idempotent) for n, t in tools.items()}
    assert flags == {
        "lookup": ("read", False, True),
        "tag": ("other", False, True),
        "wipe": ("edit", True, False),
    }
    assert tools["tag"].parameters_schema["required"] == ["name", "value"]


def _model() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptStep(calls=(call("lookup", word="durable"), call("tag", name="x", value=1))),
            say("done"),
        ]
    )


async def test_in_process_server_tools_run_in_the_loop(tmp_path: Path) -> None:
    agent = dataclasses.replace(
        default_agent("scripted:test"), mcp_servers=(McpServer("notes", server=mcp_server.server),)
    )
    outcome, journal, _ = await drive(
        lambda j: make_loop(agent, j, tmp_path, _model()), InMemoryJournal(), "x"
    )
    assert isinstance(outcome, Completed)
    results = [
        e.data.output
        for e in journal.log
        if e.type == "tool_call.updated" and e.data.status == "completed"
    ]  # type: ignore[attr-defined]
    assert results == ["durable: a short definition", "tagged x=1"]
    kinds = [e.data.kind for e in journal.log if e.type == "tool_call.started"]  # type: ignore[attr-defined]
    assert kinds == ["read", "other"]


async def test_stdio_subprocess_server(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    server = McpServer(
        "notes", command=sys.executable, args=(str(SERVER_SCRIPT), str(log)), prefix="notes"
    )
    agent = dataclasses.replace(default_agent("scripted:test"), mcp_servers=(server,))
    model = ScriptedModel(
        [
            ScriptStep(calls=(call("notes__tag", name="k", value=7),)),
            ScriptStep(calls=(call("notes__wipe"),)),
            say("ok"),
        ]
    )
    outcome, journal, history = await drive(
        lambda j: make_loop(agent, j, tmp_path, model), InMemoryJournal(), "x"
    )
    assert isinstance(outcome, Completed)
    assert log.read_text() == "tag k=7\n"  # ran in the subprocess, once
    # `wipe` is destructive by default, so it needed approval.
    opened = [e.data for e in journal.log if e.type == "input_request.opened"]
    assert len(opened) == 1 and opened[0].reason == "tool_call"  # type: ignore[attr-defined]
    assert len(history) == 2
    last = [e.data for e in journal.log if e.type == "tool_call.updated"][-1]
    assert last.output == "wiped"  # type: ignore[attr-defined]
