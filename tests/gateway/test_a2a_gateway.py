"""Remote A2A agents through the gateway (`/v1/gateway/a2a/{agent}`), in process over a
real store, and the runtime's tool that calls them: the same world as the MCP checks
(`test_gateway_checks`), whose plugin declares two agents in `.a2a.json`."""

# The `world` fixture is imported, and every test names it as its parameter.
# ruff: noqa: F811

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from opennua.gateway import A2A_PATH, PATH, Gateway
from opennua.runtime import ToolContext, ToolError
from opennua.runtime._a2a import A2aAgent, a2a_tool
from opennua.runtime._env import GatewayRoute
from opennua.runtime._tools import MemoryArtifacts

from .test_gateway_checks import (  # noqa: F401
    VALUE,
    World,
    _at_localhost,
    _call,
    forged_ticket,
    world,
)


def _send(text: str = "hello", id_: int = 3, method: str = "SendMessage") -> dict[str, Any]:
    message = {"messageId": "call_1", "role": "ROLE_USER", "parts": [{"text": text}]}
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": {"message": message}}


async def _post_a2a(
    world: World, body: dict[str, Any], agent: str = "helper", ticket: str | None = None
) -> httpx.Response:
    async with world.client() as c:
        return await c.post(
            A2A_PATH + quote(agent, safe=""),
            json=body,
            headers={"Authorization": f"Bearer {ticket or world.ticket}", "A2A-Version": "1.0"},
        )


async def _records(world: World, execution_id: str | None = None) -> list[Any]:
    await world.gateway.audit.flush()
    return list(await world.store.list_audit(execution_id=execution_id or world.execution_id))


async def test_a_message_reaches_the_agent_with_its_credential_redacted_and_audited(
    world: World,
) -> None:
    answer = await _post_a2a(world, _send())
    assert answer.status_code == 200, answer.text
    [seen] = world.upstream.seen
    assert seen["path"] == "/a2a"  # the agent's URL, resolved from the snapshot
    assert seen["headers"]["x-api-key"] == VALUE and seen["headers"]["a2a-version"] == "1.0"
    assert "authorization" not in seen["headers"]  # no token passthrough
    assert json.loads(seen["body"])["params"]["message"]["messageId"] == "call_1"
    assert VALUE not in answer.text and "[redacted:api-key]" in answer.text
    [record] = await _records(world)
    assert (record.server, record.tool, record.outcome) == ("helper", "send_message", "ok")
    assert (record.credential, record.host) == ("api-key", "upstream.test")


async def test_only_send_message_reaches_an_agent(world: World) -> None:
    for method in ("SendStreamingMessage", "GetTask", "tools/call"):
        answer = await _post_a2a(world, _send(method=method))
        assert answer.json()["error"]["data"]["code"] == "method_not_allowed", answer.text
    got = await _post_a2a(world, _send())
    assert got.status_code == 200
    assert len(world.upstream.seen) == 1
    async with world.client() as c:
        assert (await c.get(A2A_PATH + "helper")).status_code == 405


async def test_agents_and_mcp_servers_are_each_reached_only_by_their_own_route(
    world: World,
) -> None:
    answer = await _post_a2a(world, _send(), agent="notes")
    assert answer.status_code == 404 and answer.json()["code"] == "unknown_server"
    async with world.client() as c:
        mcp = await c.post(
            PATH + "helper", json=_call("x"), headers={"Authorization": f"Bearer {world.ticket}"}
        )
    assert mcp.status_code == 404 and mcp.json()["code"] == "unknown_server"
    assert world.upstream.seen == []


async def test_an_agent_outside_the_policy_is_refused_and_never_forwarded(world: World) -> None:
    answer = await _post_a2a(world, _send(), agent="other")
    error = answer.json()["error"]
    assert error["data"]["code"] == "tool_not_allowed" and "other__send_message" in error["message"]
    assert world.upstream.seen == []


async def test_an_agent_outside_the_egress_list_is_refused_at_call_time(world: World) -> None:
    tools = {"helper": {"url": "http://evil.example/a2a"}}
    execution_id, ticket = await forged_ticket(world, tools)
    answer = await _post_a2a(world, _send(), ticket=ticket)
    error = answer.json()["error"]
    assert error["data"]["code"] == "egress_denied" and "A2A agent helper" in error["message"]
    assert world.upstream.seen == []
    [record] = await _records(world, execution_id)
    assert (record.outcome, record.code) == ("refused", "egress_denied")


async def test_a_message_is_a_span_of_its_execution_on_the_a2a_route(world: World) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traced = Gateway(world.store, world.secrets, addresses=_at_localhost, tracer_provider=provider)
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=traced), base_url="http://gateway"
        ) as c:
            refused = await c.post(
                A2A_PATH + "other",
                json=_send(),
                headers={"Authorization": f"Bearer {world.ticket}"},
            )
        assert refused.json()["error"]["data"]["code"] == "tool_not_allowed"
    finally:
        await traced.aclose()
    [span] = exporter.get_finished_spans()
    assert span.name == "SendMessage send_message"
    attributes = dict(span.attributes or {})
    assert attributes["http.route"] == "/v1/gateway/a2a/{agent}"
    assert attributes["rpc.method"] == "SendMessage" and "mcp.method.name" not in attributes
    assert attributes["opennua.gateway.server"] == "other"
    assert attributes["opennua.execution_id"] == world.execution_id
    assert attributes["opennua.gateway.code"] == "tool_not_allowed"


# -- the runtime's tool ---------------------------------------------------------------


def _task_answer(state: str, text: str) -> Any:
    def reply(_credential: str) -> tuple[str, list[bytes]]:
        task = {
            "id": "exe_remote",
            "contextId": "ses_remote",
            "status": {
                "state": state,
                "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": text}]},
            },
            "artifacts": [{"artifactId": "art_1", "name": "report.md", "parts": [{"text": "x"}]}],
        }
        body = {"jsonrpc": "2.0", "id": "x", "result": {"task": task}}
        return "application/json", [json.dumps(body).encode()]

    return reply


def _ctx(tmp_path: Path, call_id: str = "call_01TESTCALL") -> ToolContext:
    import asyncio

    return ToolContext(
        workdir=tmp_path,
        run_id="run_x",
        tool_call_id=call_id,
        idempotency_key=call_id,
        artifacts=MemoryArtifacts(),
        cancel=asyncio.Event(),
    )


def _tool(world: World) -> Any:
    route = GatewayRoute("http://gateway.invalid", world.ticket, app=world.gateway)
    return a2a_tool(A2aAgent("helper", "http://upstream.test/a2a", "helper"), route)


async def test_the_tool_sends_the_call_id_as_message_id_and_reads_input_required(
    world: World, tmp_path: Path
) -> None:
    world.upstream.reply = _task_answer("TASK_STATE_INPUT_REQUIRED", "Which colour?")
    tool = _tool(world)
    assert tool.name == "helper__send_message" and tool.idempotent
    args = tool.validate({"text": "paint it", "context_id": "ses_remote"})
    first = json.loads(await tool.call(_ctx(tmp_path), args))
    assert first == {
        "state": "input-required",
        "task_id": "exe_remote",
        "context_id": "ses_remote",
        "text": "Which colour?",
        "artifacts": ["report.md"],
        "next": "the agent waits for input: call again with this task_id and your answer",
    }
    # A re-run of the same call (a new attempt after a crash) is the same message.
    await tool.call(_ctx(tmp_path), args)
    sent = [json.loads(s["body"]) for s in world.upstream.seen]
    assert [m["method"] for m in sent] == ["SendMessage", "SendMessage"]
    messages = [m["params"]["message"] for m in sent]
    assert {m["messageId"] for m in messages} == {"call_01TESTCALL"}
    assert messages[0]["contextId"] == "ses_remote" and messages[0]["parts"] == [
        {"text": "paint it"}
    ]
    assert sent[0]["params"]["configuration"].get("returnImmediately") in (None, False)
    # The answer, to that task: its id goes with it.
    world.upstream.reply = _task_answer("TASK_STATE_COMPLETED", "Blue it is.")
    answered = tool.validate({"text": "blue", "task_id": "exe_remote"})
    done = json.loads(await tool.call(_ctx(tmp_path, "call_01OTHER"), answered))
    assert (done["state"], done["text"]) == ("completed", "Blue it is.")
    assert json.loads(world.upstream.seen[-1]["body"])["params"]["message"]["taskId"] == (
        "exe_remote"
    )


async def test_a_refused_call_is_a_tool_error_that_says_why(world: World, tmp_path: Path) -> None:
    await world.secrets.delete(world.workspace_id, "api-key")
    tool = _tool(world)
    with pytest.raises(ToolError, match=r"A2A agent helper: gateway refused \(secret_missing\)"):
        await tool.call(_ctx(tmp_path), tool.validate({"text": "hello"}))
    assert world.upstream.seen == []
    # Without a gateway at all: a failed call, not a crash.
    alone = a2a_tool(A2aAgent("helper", "http://upstream.test/a2a", "helper"), None)
    with pytest.raises(ToolError, match="no gateway"):
        await alone.call(_ctx(tmp_path), alone.validate({"text": "hello"}))
