"""Remote A2A agents as tools (a plugin's `.a2a.json`; docs/protocols.md, "Calling another
agent").

Each agent is one tool, `<prefix>__send_message(text, context_id?, task_id?)`: an A2A
`SendMessage` (blocking: the answer is the task once it is final or waits for its
caller) sent with `a2a-sdk`'s JSON-RPC transport to the gateway (`/v1/gateway/a2a/NAME`),
which resolves where the agent is, injects its credential and audits the call; the
runtime sends its ticket and nothing else. The model gets the task's state, ids, the
agent's text and its artifacts' names; `input-required` comes back as such, and the model
answers by calling again with the `task_id`.

The message's `messageId` is the tool call's id (its idempotency key), the same in every
attempt: a call re-run after a crash or a fenced attempt is the same message on the remote
side (an A2A server that keys on it, as opennua's does, starts its task once), which is
why the tool is declared idempotent.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from opennua.runtime._env import GatewayRoute
from opennua.runtime._errors import ToolError
from opennua.runtime._mcp import _traceparent
from opennua.runtime._tools import Tool, ToolContext, make_tool

#: Where the gateway takes messages to A2A agents (`gateway.A2A_PATH`).
A2A_GATEWAY_PATH = "/v1/gateway/a2a/"
TOOL = "send_message"
#: A blocking send waits for the remote task; the gateway reads its upstream for 300 s.
_TIMEOUT = httpx.Timeout(30.0, read=330.0)


@dataclass(frozen=True)
class A2aAgent:
    """A remote A2A agent the model may message. `url` is described (the digest) but never
    used: the gateway resolves the agent's address from the session's snapshot."""

    name: str
    url: str
    prefix: str
    description: str = ""

    def describe(self) -> dict[str, Any]:
        """Every field (all are part of the agent's digest)."""
        return dataclasses.asdict(self)


def a2a_tool(agent: A2aAgent, gateway: GatewayRoute | None) -> Tool:
    """The tool that sends `agent` a message through `gateway`."""

    async def send_message(
        ctx: ToolContext, text: str, context_id: str | None = None, task_id: str | None = None
    ) -> str:
        if gateway is None:
            raise ToolError(
                f"A2A agent {agent.name!r} is remote and this supervisor has no gateway "
                "(run `nua serve --role all`, or give supervisors --gateway-url)"
            )
        return await _send(agent, gateway, ctx.idempotency_key, text, context_id, task_id)

    about = agent.description or f"the remote agent {agent.name}"
    return make_tool(
        send_message,
        name=f"{agent.prefix}__{TOOL}",
        kind="other",
        title=f"Message {agent.name}",
        idempotent=True,  # the message id is the call's: a re-run is the same message
        description=(
            f"Send a message to {about} (an A2A agent) and wait for its answer: the task's "
            "state, task_id, context_id, the agent's text and its artifacts. To continue "
            "the same conversation pass its context_id; to answer a task whose state is "
            "input-required pass its task_id (and your answer as text)."
        ),
    )


async def _send(
    agent: A2aAgent,
    gateway: GatewayRoute,
    message_id: str,
    text: str,
    context_id: str | None,
    task_id: str | None,
) -> str:
    from a2a.client.transports.jsonrpc import JsonRpcTransport
    from a2a.types import (
        AgentCard,
        Message,
        Part,
        Role,
        SendMessageConfiguration,
        SendMessageRequest,
    )
    from a2a.utils.errors import A2AError

    url = gateway.url.rstrip("/") + A2A_GATEWAY_PATH + quote(agent.name, safe="")
    message = Message(
        message_id=message_id,
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        context_id=context_id or "",
        task_id=task_id or "",
    )
    request = SendMessageRequest(
        message=message, configuration=SendMessageConfiguration(return_immediately=False)
    )
    refused: dict[str, str] = {}
    async with _gateway_http(gateway, refused) as http:
        transport = JsonRpcTransport(http, AgentCard(name=agent.name), url, is_shared_httpx=True)
        try:
            response = await transport.send_message(request)
        except A2AError as exc:  # the SDK's client errors, and JSON-RPC errors mapped
            if refused.get("code") == "grant_revoked" and gateway.on_revoked is not None:
                await gateway.on_revoked()
            why = refused.get("why") or f"{type(exc).__name__}: {exc}"
            raise ToolError(f"A2A agent {agent.name}: {why}") from exc
    return json.dumps(_result(response), ensure_ascii=False)


def _gateway_http(gateway: GatewayRoute, refused: dict[str, str]) -> httpx.AsyncClient:
    """An HTTP client to the gateway with the attempt's ticket (in process: its app). Why
    a call failed — a JSON-RPC error (the gateway's refusal names its code in
    `data.code`), or an HTTP error's problem document (the gateway's, or the agent's
    own) — is put into `refused`: the SDK's errors keep only part of it."""

    async def note(response: httpx.Response) -> None:
        await response.aread()
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code >= 400:
            code = body.get("code", "") if isinstance(body, dict) else ""
            detail = body.get("detail", "") if isinstance(body, dict) else response.text[:500]
            refused["why"] = f"HTTP {response.status_code} {code}: {detail}".strip()
            refused["code"] = str(code)
            return
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            data = error.get("data")
            refused["why"] = str(error.get("message", "")) or json.dumps(error)
            if isinstance(data, dict) and isinstance(data.get("code"), str):
                refused["code"] = data["code"]

    transport = None if gateway.app is None else httpx.ASGITransport(app=gateway.app)
    return httpx.AsyncClient(
        headers={"Authorization": f"Bearer {gateway.ticket}"},
        timeout=_TIMEOUT,
        transport=transport,
        # The tool call's trace context: the gateway's span of the call is its child.
        event_hooks={"request": [_traceparent], "response": [note]},
    )


def _result(response: Any) -> dict[str, Any]:
    """What the model reads of a `SendMessageResponse`."""
    from a2a.types import Role, TaskState

    if response.HasField("message"):  # an agent may answer with a message, no task
        m = response.message
        return {"state": None, "context_id": m.context_id or None, "text": _text(m.parts)}
    task = response.task
    state = TaskState.Name(task.status.state).removeprefix("TASK_STATE_").lower()
    text = _text(task.status.message.parts)
    if not text:
        agent = [m for m in task.history if m.role == Role.ROLE_AGENT]
        text = _text(agent[-1].parts) if agent else ""
    out: dict[str, Any] = {
        "state": state.replace("_", "-"),
        "task_id": task.id,
        "context_id": task.context_id,
        "text": text,
        "artifacts": [a.name for a in task.artifacts],
    }
    if state == "input_required":
        out["next"] = "the agent waits for input: call again with this task_id and your answer"
    return out


def _text(parts: Any) -> str:
    return "\n".join(p.text for p in parts if p.text)
