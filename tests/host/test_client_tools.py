"""Client tools on `send_message`: in the log (`turn.started`, the turn's state), on the
execution the runtime reads them from; bounded; never an agent tool's
name."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from opennua.protocol import (
    CreateSession,
    SendMessage,
    action_from_dict,
    replay,
)
from opennua.protocol.actions import TextPart
from tests.server._harness import Env, environment

PICK = {
    "name": "pick_color",
    "description": "Ask the user to pick a color",
    "parameters": {"type": "object", "properties": {"hint": {"type": "string"}}},
}


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with environment(f"sqlite:///{tmp_path}/nua.db", tmp_path) as e:
        yield e


def _msg(key: str, tools: list[dict[str, Any]]) -> SendMessage:
    return SendMessage(
        intent_id=key, client_id="cli_a", content=[TextPart(text="hi")], client_tools=tools
    )


async def _session(env: Env) -> str:
    result = await env.host.submit(None, CreateSession(intent_id="int_s", client_id="cli_a"))
    assert result.type == "accepted"
    return result.ids["session_id"]


async def test_client_tools_are_in_the_log_the_state_and_the_execution(env: Env) -> None:
    sid = await _session(env)
    result = await env.host.submit(sid, _msg("int_m", [PICK, {"name": "beep"}]))
    assert result.type == "accepted", result
    started = next(a for a in await env.host.history(sid) if a["type"] == "turn.started")
    beep = {"name": "beep", "description": "", "parameters": {}}
    assert started["data"]["client_tools"] == [PICK, beep]
    execution = await env.store.get_execution(result.ids["execution_id"])
    assert execution.client_tools == [PICK, beep]
    _, state = await env.host.snapshot(sid)
    assert state["turns"][0]["client_tools"] == [PICK, beep]
    # Rebuilt from the log alone, as after a restart.
    log = [action_from_dict(a) for a in await env.host.history(sid)]
    assert replay(log)["turns"][0]["client_tools"] == [PICK, beep]


async def test_a_turn_without_client_tools_logs_what_it_always_did(env: Env) -> None:
    sid = await _session(env)
    result = await env.host.submit(sid, _msg("int_m", []))
    assert result.type == "accepted"
    started = next(a for a in await env.host.history(sid) if a["type"] == "turn.started")
    assert "client_tools" not in started["data"]
    assert (await env.store.get_execution(result.ids["execution_id"])).client_tools is None


async def test_a_client_tool_named_like_an_agent_tool_is_refused(env: Env) -> None:
    sid = await _session(env)
    result = await env.host.submit(sid, _msg("int_m", [{"name": "shell"}, PICK]))
    assert result.type == "rejected" and result.code == "client_tool_conflict"
    assert "shell" in result.message
    assert not [a for a in await env.host.history(sid) if a["type"] == "turn.started"]


@pytest.mark.parametrize(
    ("tools", "why"),
    [
        ([{"name": "bad name"}], "pattern"),
        ([{"name": "x" * 65}], "at most 64"),
        ([{"name": "mcp__x"}], "pattern"),
        ([{"name": "__x"}], "pattern"),
        ([{"name": f"t{i}"} for i in range(33)], "at most 32"),
        ([{"name": "a"}, {"name": "a"}], "unique"),
        ([{"name": "a", "parameters": {"type": "string"}}], "object schema"),
        ([{"name": "a", "parameters": {"description": "x" * 17000}}], "bytes"),
        ([{"name": "a", "description": "x" * 4097}], "4096"),
    ],
)
def test_client_tools_are_bounded(tools: list[dict[str, Any]], why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        _msg("int_m", tools)
