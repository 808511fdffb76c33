"""An editor for the ACP tests: the `agent-client-protocol` SDK's client side driving a real
`nua acp` subprocess, recording every `session/update` and every raw message it receives,
and answering permission requests as the test says."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, BinaryIO

from acp import PROTOCOL_VERSION
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)
from acp.stdio import spawn_agent_process

from tests.e2e._proc import Server

#: What an editor does when asked: the option id to select, or None to dismiss the dialog.
Policy = Callable[[ToolCallUpdate, list[PermissionOption]], Awaitable[str | None]]


async def allow_once(_call: ToolCallUpdate, options: list[PermissionOption]) -> str | None:
    return next(o.option_id for o in options if o.kind == "allow_once")


class Editor:
    """The ACP `Client`: what a real editor would show, as data."""

    def __init__(self, policy: Policy = allow_once) -> None:
        self.policy = policy
        self.updates: list[Any] = []
        self.asked: list[tuple[ToolCallUpdate, list[PermissionOption]]] = []
        self.received: list[dict[str, Any]] = []  # every raw message from the agent
        self.conn: ClientSideConnection | None = None
        self.proc: asyncio.subprocess.Process | None = None

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **_: Any
    ) -> RequestPermissionResponse:
        self.asked.append((tool_call, options))
        chosen = await self.policy(tool_call, options)
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        allowed = AllowedOutcome(outcome="selected", option_id=chosen)
        return RequestPermissionResponse(outcome=allowed)

    def on_connect(self, conn: Any) -> None:
        pass

    def observe(self, event: StreamEvent) -> None:
        if event.direction is StreamDirection.INCOMING:
            self.received.append(event.message)

    # -- what the editor shows --------------------------------------------------------

    def kinds(self) -> list[str]:
        return [u.session_update for u in self.updates]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(
            u.content.text
            for u in self.updates
            if u.session_update == kind and getattr(u.content, "type", "") == "text"
        )

    def tool_calls(self) -> dict[str, dict[str, Any]]:
        """Each tool call as the editor folds its updates: title, kind, last status."""
        calls: dict[str, dict[str, Any]] = {}
        for u in self.updates:
            if u.session_update == "tool_call":
                calls[u.tool_call_id] = {"title": u.title, "kind": u.kind, "status": u.status}
            elif u.session_update == "tool_call_update" and u.status is not None:
                calls[u.tool_call_id]["status"] = u.status
        return calls

    def plan(self) -> list[tuple[str, str]]:
        plans = [u for u in self.updates if u.session_update == "plan"]
        return [(e.content, e.status) for e in plans[-1].entries] if plans else []


def nua_acp_args(
    server: Server, client_id: str, *extra: str, token: str | None = None
) -> list[str]:
    return [
        "-m",
        "opennua.cli",
        "--url",
        server.url,
        "--token",
        token or server.token,
        "--client-id",
        client_id,
        "acp",
        *extra,
    ]


def _log(path: Path) -> BinaryIO:
    """Where `nua acp` writes its stderr (stdout is the protocol's)."""
    return path.open("ab")


@contextlib.asynccontextmanager
async def editor(
    server: Server,
    client_id: str,
    policy: Policy = allow_once,
    *,
    token: str | None = None,
    log: Path | None = None,
) -> AsyncIterator[tuple[Editor, ClientSideConnection]]:
    """`nua acp` started as an editor starts it, initialized; closing stdin ends it."""
    made = Editor(policy)
    sink = _log(log or server.data / f"acp-{client_id}.log")
    try:
        async with spawn_agent_process(
            made,
            sys.executable,
            *nua_acp_args(server, client_id, token=token),
            transport_kwargs={"stderr": sink.fileno(), "shutdown_timeout": 10.0},
            observers=[made.observe],
        ) as (conn, proc):
            made.conn, made.proc = conn, proc
            init = await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 60)
            assert init.agent_capabilities is not None and init.agent_capabilities.load_session
            yield made, conn
    finally:
        sink.close()
