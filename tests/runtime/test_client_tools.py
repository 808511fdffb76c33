"""Client tools (AG-UI frontend tools): offered beside the agent's own, a call parks on an
input request, the answer's payload is the call's result; the demo model calls one."""

from __future__ import annotations

from pathlib import Path

from opennua.runtime import (
    AGENT_TOOL_NAMES,
    Completed,
    RuntimeFailure,
    Suspended,
    client_tools,
    default_agent,
)
from opennua.runtime._builtins import BUILTIN_TOOLS
from opennua.runtime._client_tools import client_prompt
from opennua.runtime._demo import demo_model
from opennua.runtime.testing import InMemoryJournal
from tests.runtime.helpers import drive, make_loop

PICK = {
    "name": "pick_color",
    "description": "Ask the user to pick a color",
    "parameters": {"type": "object", "properties": {"hint": {"type": "string"}}},
}


def test_agent_tool_names_are_the_builtins_and_skill() -> None:
    assert {t.name for t in BUILTIN_TOOLS} | {"skill"} == AGENT_TOOL_NAMES


async def test_a_client_tool_call_parks_and_the_answer_is_its_result(tmp_path: Path) -> None:
    agent = default_agent("scripted:demo")
    model = demo_model(step_delay=0)
    outcome, journal, history = await drive(
        lambda j: make_loop(agent, j, tmp_path, model, client_tools=client_tools([PICK])),
        InMemoryJournal(),
        "Pick a color",
    )
    assert isinstance(history[0], Suspended)
    started = next(e.data for e in journal.log if e.type == "tool_call.started")
    assert started.name == "pick_color" and started.input == {"hint": "demo"}  # type: ignore[attr-defined]
    opened = next(e.data for e in journal.log if e.type == "input_request.opened")
    assert opened.reason == "input_required"  # type: ignore[attr-defined]
    assert opened.tool_call_id == started.tool_call_id  # type: ignore[attr-defined]
    assert opened.prompt == client_prompt("pick_color")  # type: ignore[attr-defined]
    assert opened.response_schema is None  # type: ignore[attr-defined]
    result = [e.data for e in journal.log if e.type == "tool_call.updated"][-1]
    assert result.status == "completed" and result.output == "forty-two"  # type: ignore[attr-defined]
    # The model's next step saw the client's result.
    assert isinstance(outcome, Completed)
    assert outcome.output == "The client tool `pick_color` returned: forty-two"


async def test_without_client_tools_the_demo_plays_its_own_script(tmp_path: Path) -> None:
    agent = default_agent("scripted:demo")
    loop = make_loop(agent, InMemoryJournal(), tmp_path, demo_model(step_delay=0))
    outcome = await loop.run("Write a report")
    # The demo's first step is its plan, then a file, then the shell that asks approval.
    assert isinstance(outcome, Suspended)
    names = [e.data.name for e in loop.journal.log if e.type == "tool_call.started"]  # type: ignore[attr-defined]
    assert names == ["plan", "write_file", "shell"]


async def test_a_client_tool_named_like_an_agent_tool_fails_the_turn(tmp_path: Path) -> None:
    agent = default_agent("scripted:demo")
    clash = client_tools([{"name": "read_file"}])
    loop = make_loop(
        agent, InMemoryJournal(), tmp_path, demo_model(step_delay=0), client_tools=clash
    )
    try:
        await loop.run("x")
    except RuntimeFailure as exc:
        assert exc.code == "client_tool_conflict"
    else:
        raise AssertionError("the clash was not refused")


def test_client_tools_are_offered_to_the_root_run_only() -> None:
    agent = default_agent("scripted:demo")
    tools = {t.name: t for t in (*agent.tools, *client_tools([PICK]))}
    assert "pick_color" in agent.offered(tools, None, depth=0)
    assert "pick_color" not in agent.offered(tools, None, depth=1)
    assert "read_file" in agent.offered(tools, None, depth=1)
